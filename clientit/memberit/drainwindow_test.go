package memberit_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestSecondRevocationKeepsTheFirstsDeadline: the coordinator's rebalance
// deadline for a member starts at its first revocation and does not move
// for a second one that comes while the first is still draining. A member
// whose handlers hold every revoked shard lets the second go by that first
// deadline too (90% of the rebalance timeout from the first revocation's
// heartbeat), so it is never fenced; counted from the second revocation,
// its drain ran past the coordinator's deadline.
func TestSecondRevocationKeepsTheFirstsDeadline(t *testing.T) {
	t.Parallel()
	const rebalance = 2 * time.Second
	const prefix, shards = "drainwin", 6
	srv := redistest.Standalone(t)
	cfg := testGroupConfig()
	cfg.RebalanceTimeout = rebalance
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: cfg})
	coord.CreateStream(prefix, shards)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redistest.CreateShards(ctx, srv.Client(), prefix, shards, prefix); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, coord: coord, rdb: srv.Client(), prefix: prefix, shards: shards}

	var (
		mu      sync.Mutex
		fenced  []string
		revoked []int
	)
	holding := make(chan int, shards)
	handler := func(ctx context.Context, m *member.Message) error {
		if m.MemberID == "dw-a-m0" && m.Fields["eventId"] == "hold-"+strconv.Itoa(m.Shard)+"-0" {
			holding <- m.Shard
			<-ctx.Done() // held until the drain deadline cuts it
			return nil
		}
		return m.Ack(ctx)
	}
	hooks := member.WithHooks(member.Hooks{
		OnHeartbeat: func(_ context.Context, ev member.HeartbeatEvent) {
			if ev.Status == string(protocol.StatusFencedMemberEpoch) {
				mu.Lock()
				fenced = append(fenced, ev.MemberID)
				mu.Unlock()
			}
		},
		OnRevoked: func(_ context.Context, c member.ShardChange) {
			mu.Lock()
			revoked = append(revoked, c.Shards...)
			mu.Unlock()
		},
	})
	e.start("dw-a", handler, member.WithMaxWorkers(shards), hooks)
	for i := range shards {
		e.publish(i, 1, "hold")
	}
	for range shards {
		select {
		case <-holding:
		case <-time.After(10 * time.Second):
			t.Fatal("dw-a does not hold a record of every shard")
		}
	}
	// b joins: a gives three of its six shards up, all held. Half the
	// rebalance timeout later c joins: a gives one more up, held too.
	e.start("dw-b", handler)
	poll.Hold(t.Context(), rebalance/2)
	e.start("dw-c", handler)
	eventually(t, 2*rebalance+5*time.Second, "a lets four shards go", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(revoked) >= 4
	})
	// A fence would come by half a rebalance timeout more: none comes
	// all along.
	poll.Stays(rebalance/2, 20*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(fenced) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(fenced) > 0 {
		t.Fatalf("fenced while letting its held shards go: %v (revoked %v)", fenced, revoked)
	}
}
