package memberit_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestRetryInPlaceKeepsKeyOrder publishes keyed records to one shard and
// makes the handler fail transiently on some of them: with retry in place
// every record is handled once, successfully, in publish order per key,
// and nothing stays pending; without it the failed records stay pending
// (Nacked). Both for a Handler and a BatchHandler, on real Redis and the
// real coordinator.
func TestRetryInPlaceKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	const records, keys = 30, 3
	// failures: record number → how many of its first calls fail.
	failures := map[int]int{4: 1, 11: 2, 23: 1}
	tests := []struct {
		name  string
		batch bool
		retry bool
	}{
		{"handler, retry in place", false, true},
		{"batch handler, retry in place", true, true},
		{"handler, no retry", false, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "retry"+strconv.Itoa(i), 1)
			for n := range records {
				if _, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.key(0),
					Values: map[string]any{"key": "k" + strconv.Itoa(n%keys), "n": strconv.Itoa(n)}}).Result(); err != nil {
					t.Fatal(err)
				}
			}
			var (
				mu       sync.Mutex
				calls    = map[int]int{}
				done     []int // record numbers handled successfully, in order
				hookErrs []*member.HandlerError
			)
			// handle is one call for one record; it fails while the
			// record still has failures left.
			handle := func(m *member.Message) (int, bool) {
				n, _ := strconv.Atoi(m.Fields["n"].(string))
				mu.Lock()
				defer mu.Unlock()
				calls[n]++
				if calls[n] <= failures[n] {
					return n, false
				}
				done = append(done, n)
				return n, true
			}
			opts := []member.Opt{member.WithMaxWorkers(4), member.WithBatch(8), member.WithClaimMinIdle(time.Minute),
				member.WithHooks(member.Hooks{OnHandlerError: func(_ context.Context, he *member.HandlerError) {
					mu.Lock()
					hookErrs = append(hookErrs, he)
					mu.Unlock()
				}})}
			if tc.retry {
				opts = append(opts, member.WithHandlerRetry(3, 5*time.Millisecond, 20*time.Millisecond))
			}
			var r *running
			if tc.batch {
				r = e.startBatch("rt", func(ctx context.Context, msgs []*member.Message) error {
					var ok []*member.Message
					for _, m := range msgs {
						n, good := handle(m)
						if !good {
							// Settle what came before; the rest is retried.
							if err := member.AckAll(ctx, ok); err != nil {
								return err
							}
							return fmt.Errorf("record %d: transient failure", n)
						}
						ok = append(ok, m)
					}
					return member.AckAll(ctx, ok)
				}, opts...)
			} else {
				r = e.start("rt", func(ctx context.Context, m *member.Message) error {
					if n, good := handle(m); !good {
						return fmt.Errorf("record %d: transient failure", n)
					}
					return m.Ack(ctx)
				}, opts...)
			}
			wantDone := records
			if !tc.retry {
				wantDone = records - len(failures)
			}
			eventually(t, 15*time.Second, "every record handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(done) == wantDone
			})
			// The handler records a record done before its Ack returns, an
			// OnHandlerError hook may still run on another worker then, the
			// counters move as the handlers finish, and Acked as the
			// coalesced XACKs are answered: everything is read once the
			// last handler has finished (hooks run before that), its acks
			// are in Redis, and the lag is known to be 0. mu is not held
			// while waiting: a hook that still has to run takes it.
			eventually(t, 10*time.Second, "caught up, nothing in flight", func() bool {
				st := r.rt.Stats()
				return len(st) == 1 && st[0].LagKnown && st[0].Lag == 0 && st[0].InFlight == 0 && st[0].Acked >= int64(wantDone)
			})
			mu.Lock()
			defer mu.Unlock()
			if tc.retry {
				// Per-key order: each key's numbers ascend; in fact the
				// whole shard's do (one shard, handled in stream order).
				for i := 1; i < len(done); i++ {
					if done[i] <= done[i-1] {
						t.Fatalf("records handled out of order: %v", done)
					}
				}
			}
			wantPending := int64(0)
			if !tc.retry {
				wantPending = int64(len(failures))
			}
			if p := e.pending(0); p != wantPending {
				t.Fatalf("%d records pending, want %d (retry in place %v)", p, wantPending, tc.retry)
			}
			wantHookErrs := 0
			for _, f := range failures {
				if tc.retry {
					wantHookErrs += f
				} else {
					wantHookErrs++
				}
			}
			if len(hookErrs) != wantHookErrs {
				t.Fatalf("%d OnHandlerError calls, want %d: %+v", len(hookErrs), wantHookErrs, hookErrs)
			}
			for _, he := range hookErrs {
				if he.Retry != tc.retry || he.Err == nil || len(he.Messages) == 0 {
					t.Fatalf("OnHandlerError %+v, want Retry %v", he, tc.retry)
				}
			}
			stats := r.rt.Stats()
			if len(stats) != 1 {
				t.Fatalf("stats %+v, want one shard", stats)
			}
			s := stats[0]
			wantNacked := int64(0)
			if !tc.retry {
				wantNacked = int64(len(failures))
			}
			if s.Acked != int64(wantDone) || s.Nacked != wantNacked || s.HandlerErrors != int64(wantHookErrs) ||
				!s.Owned || s.LastID == "" || s.InFlight != 0 {
				t.Fatalf("stats %+v: want %d acked, %d nacked, %d handler errors", s, wantDone, wantNacked, wantHookErrs)
			}
			if tc.retry && s.Retries != int64(wantHookErrs) {
				t.Fatalf("stats %+v: want %d retries", s, wantHookErrs)
			}
		})
	}
}

// TestRetryStopsWhenTheMemberLeaves: a handler that keeps failing is
// retried in place only while the member may acknowledge: when it leaves,
// retries end at the leave timeout at the latest (the handler's context is
// cancelled), and the record stays pending for the next owner.
func TestRetryStopsWhenTheMemberLeaves(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "retrystop", 1)
	e.publish(0, 1, "stuck")
	var mu sync.Mutex
	by := map[string]int{}
	a := e.start("rs-a", func(ctx context.Context, m *member.Message) error {
		mu.Lock()
		by[m.MemberID]++
		mu.Unlock()
		return errors.New("always failing")
	}, member.WithHandlerRetry(member.MaxHandlerAttempts, 5*time.Millisecond, 20*time.Millisecond))
	eventually(t, 10*time.Second, "rs-a retries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return by["rs-a-m0"] >= 3
	})
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	after := by["rs-a-m0"]
	mu.Unlock()
	poll.Stays(100*time.Millisecond, 10*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return by["rs-a-m0"] == after
	})
	mu.Lock()
	defer mu.Unlock()
	if by["rs-a-m0"] != after {
		t.Fatalf("retries went on after Run returned: %d then %d", after, by["rs-a-m0"])
	}
	if e.pending(0) != 1 {
		t.Fatalf("the failing record is not pending")
	}
}
