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
	return newTestCoreTaking(t, workers, 1)
}

func newTestCoreTaking(t *testing.T, workers, take int) *testCore {
	tc := &testCore{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tc.memberCore = &memberCore{
		id: "m", cfg: &config{stream: "s", group: "g"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		lease: newLeaseClock(time.Minute), sched: newScheduler(workers, take), ctx: ctx, cancel: cancel,
		stats: &statsBoard{},
		send: func(msg any) {
			tc.mu.Lock()
			tc.sent = append(tc.sent, msg)
			tc.mu.Unlock()
		},
	}
	tc.lease.renew(tc.lease.stamp())
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
// batches of different sizes: one turn per shard in rotation — one record
// per turn for a Handler, every queued record of the shard for a
// BatchHandler — and each shard's records in order.
func TestSchedulerRotatesOverShards(t *testing.T) {
	tests := []struct {
		name string
		take int
		want [][]string // one entry per handler call
	}{
		{"one record per turn", 1, [][]string{{"0/0-0"}, {"1/0-0"}, {"2/0-0"}, {"0/1-0"}, {"2/1-0"}, {"0/2-0"}, {"0/3-0"}}},
		{"a batch per turn", 0, [][]string{{"0/0-0", "0/1-0", "0/2-0", "0/3-0"}, {"1/0-0"}, {"2/0-0", "2/1-0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCoreTaking(t, 1, tt.take)
			runs := []*shardRun{newShardRun(tc.memberCore, 0, 0), newShardRun(tc.memberCore, 1, 0), newShardRun(tc.memberCore, 2, 0)}
			sizes := []int{4, 1, 2}
			for i, r := range runs {
				r.deliver(batch(r, sizes[i]))
			}
			var (
				mu    sync.Mutex
				calls [][]string
				n     int
				done  = make(chan struct{})
			)
			tc.sched.start(func(run *shardRun, ms []*Message) {
				mu.Lock()
				var call []string
				for _, m := range ms {
					call = append(call, strconv.Itoa(run.shard)+"/"+m.ID)
				}
				calls = append(calls, call)
				n += len(ms)
				if n == 7 {
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
			if !slices.EqualFunc(calls, tt.want, slices.Equal) {
				t.Fatalf("calls %v, want %v", calls, tt.want)
			}
		})
	}
}
