package memberit_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestRevokedShardHandlerCancelledAtDrainDeadline: a revoked shard's
// records already read may finish while the member still owns the shard
// (it has not reported it REVOKED), but a handler that does not finish is
// cut at the drain deadline (90% of the rebalance timeout, counted from
// the heartbeat that revoked the shard): its context is cancelled, its Ack
// refused with ErrRevoked, the shard reported REVOKED and read by its new
// owner, who gets the held record again.
func TestRevokedShardHandlerCancelledAtDrainDeadline(t *testing.T) {
	t.Parallel()
	const rebalance = 1500 * time.Millisecond
	srv := redistest.Standalone(t)
	cfg := testGroupConfig()
	cfg.RebalanceTimeout = rebalance
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: cfg})
	coord.CreateStream("drain", 2)
	rdb := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redistest.CreateShards(ctx, rdb, "drain", 2, "drain"); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, coord: coord, rdb: rdb, prefix: "drain", shards: 2}

	type cut struct {
		shard  int
		at     time.Time
		ackErr error
	}
	var (
		mu       sync.Mutex
		revokeAt = map[int]time.Time{} // shard → when a's OnRevoked ran
		heldBy   = map[string][]int{}  // member → shards whose held record it handled
	)
	holding := make(chan int, 2)
	cuts := make(chan cut, 2)
	handler := func(ctx context.Context, m *member.Message) error {
		if m.Fields["eventId"] == "hold-"+strconv.Itoa(m.Shard)+"-0" {
			mu.Lock()
			heldBy[m.MemberID] = append(heldBy[m.MemberID], m.Shard)
			mu.Unlock()
			if m.MemberID == "rs-da-m0" {
				holding <- m.Shard
				<-ctx.Done()
				cuts <- cut{shard: m.Shard, at: time.Now(), ackErr: m.Ack(context.Background())}
				return nil
			}
		}
		return m.Ack(ctx)
	}
	a := e.start("rs-da", handler, member.WithMaxWorkers(2),
		member.WithOnRevoked(func(ctx context.Context, shards []int) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range shards {
				revokeAt[s] = time.Now()
			}
		}))
	e.publish(0, 1, "hold")
	e.publish(1, 1, "hold")
	for range 2 {
		select {
		case <-holding:
		case <-time.After(10 * time.Second):
			t.Fatal("rs-da does not hold both records")
		}
	}
	// b joins: a must give one shard up, whose handler holds.
	joined := time.Now()
	e.start("rs-db", handler, member.WithClaimMinIdle(300*time.Millisecond))
	var c cut
	select {
	case c = <-cuts:
	case <-time.After(rebalance + 5*time.Second):
		t.Fatal("no held handler of the revoked shard was cancelled")
	}
	if !errors.Is(c.ackErr, member.ErrRevoked) {
		t.Fatalf("Ack of the abandoned record: %v, want ErrRevoked", c.ackErr)
	}
	// The revoke came after b joined; the cut at 90% of the rebalance
	// timeout from that heartbeat's send, never sooner than the drain
	// allows and well before the coordinator's own deadline.
	if d := c.at.Sub(joined); d < rebalance*9/10-100*time.Millisecond || d > rebalance+time.Second {
		t.Fatalf("handler of revoked shard %d cancelled %v after b joined; want about 90%% of %v", c.shard, d, rebalance)
	}
	// OnRevoked runs on the member's actor after the cut: wait for it.
	var at time.Time
	eventually(t, 5*time.Second, "OnRevoked for the abandoned shard", func() bool {
		mu.Lock()
		defer mu.Unlock()
		var released bool
		at, released = revokeAt[c.shard]
		return released
	})
	if at.Before(c.at.Add(-50 * time.Millisecond)) {
		t.Fatalf("shard %d: OnRevoked at %v, handler cut at %v: the shard was let go before its handler was cut", c.shard, at, c.at)
	}
	// The other shard stays a's, its handler still held.
	select {
	case other := <-cuts:
		t.Fatalf("the handler of shard %d, still owned, was cancelled", other.shard)
	case <-time.After(300 * time.Millisecond):
	}
	eventually(t, 10*time.Second, "the held record redelivered to rs-db", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range heldBy["rs-db-m0"] {
			if s == c.shard {
				return true
			}
		}
		return false
	})
	eventually(t, 5*time.Second, "the revoked shard's record acknowledged by its new owner", func() bool { return e.pending(c.shard) == 0 })
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}
