package member

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// testCore is a member core without an actor: what it would be told is
// recorded.
type testCore struct {
	*memberCore
	mu   sync.Mutex
	sent []any
}

func newTestCore(t *testing.T, workers int) *testCore {
	tc := &testCore{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tc.memberCore = &memberCore{
		id: "m", cfg: &config{stream: "s", group: "g"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		lease: newLeaseClock(time.Minute), sched: newScheduler(workers), ctx: ctx, cancel: cancel,
		send: func(msg any) {
			tc.mu.Lock()
			tc.sent = append(tc.sent, msg)
			tc.mu.Unlock()
		},
	}
	tc.lease.renew(tc.lease.now())
	return tc
}

func (tc *testCore) idles() int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	n := 0
	for _, m := range tc.sent {
		if _, ok := m.(*runIdleMsg); ok {
			n++
		}
	}
	return n
}

func batch(run *shardRun, n int) []*Message {
	out := make([]*Message, n)
	for i := range out {
		out[i] = &Message{StreamKey: run.key, Shard: run.shard, ID: strconv.Itoa(i) + "-0", run: run}
	}
	return out
}

// TestSchedulerRotatesOverShards: one worker, three shards with ready
// batches of different sizes: records are handled one per shard per turn,
// and each shard's records in order.
func TestSchedulerRotatesOverShards(t *testing.T) {
	tc := newTestCore(t, 1)
	runs := []*shardRun{newShardRun(tc.memberCore, 0, 0), newShardRun(tc.memberCore, 1, 0), newShardRun(tc.memberCore, 2, 0)}
	sizes := []int{4, 1, 2}
	for i, r := range runs {
		r.deliver(batch(r, sizes[i]))
	}
	var (
		mu    sync.Mutex
		order []string
		done  = make(chan struct{})
	)
	tc.sched.start(func(run *shardRun, m *Message) {
		mu.Lock()
		order = append(order, strconv.Itoa(run.shard)+"/"+m.ID)
		if len(order) == 7 {
			close(done)
		}
		mu.Unlock()
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("records not handled")
	}
	tc.sched.close()
	if !tc.sched.wait(5 * time.Second) {
		t.Fatal("workers did not stop")
	}
	want := []string{"0/0-0", "1/0-0", "2/0-0", "0/1-0", "2/1-0", "0/2-0", "0/3-0"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}
