package memberit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestLostReadAnswerIsReadFromPending: Redis runs a member's XREADGROUP for
// new entries, or its XAUTOCLAIM, moving a record into the member's pending
// list, and the answer is lost (the connection closes). go-redis, with its
// default options, would send the command again, which finds nothing (the
// record is no longer new, nor idle), and the record would wait in the
// pending list for the claim min idle (20 s here); the member sends its
// reads and claims once, so the failure shows and it reads its own pending
// entries next.
func TestLostReadAnswerIsReadFromPending(t *testing.T) {
	tests := []struct {
		name string
		// beforeStart and afterStart publish the record whose answer is
		// lost, tagged "lost", so that the member reads or claims it;
		// either may be nil.
		beforeStart, afterStart func(t *testing.T, e *env)
	}{
		{name: "read of new entries", afterStart: func(t *testing.T, e *env) {
			e.publish(0, 1, "before")
			e.publish(0, 1, "lost")
		}},
		{name: "claim", beforeStart: func(t *testing.T, e *env) {
			// Another consumer read it long ago (IDLE) and never settled
			// it: the member's first claim takes it.
			id := e.publish(0, 1, "lost")[0]
			ctx := context.Background()
			if err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: e.prefix, Consumer: "gone",
				Streams: []string{e.key(0), ">"}, Count: 1, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := e.rdb.Do(ctx, "XCLAIM", e.key(0), e.prefix, "gone", 0, id, "IDLE", 60000).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Standalone(t)
			e := newEnvOn(t, srv.Client(), "lostread", 1)
			proxy := redistest.NewProxy(t, srv.Addr)
			viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr}) // go-redis defaults: 3 retries
			t.Cleanup(func() { viaProxy.Close() })
			proxy.DropAnswerContaining("lost-0-0")
			if tc.beforeStart != nil {
				tc.beforeStart(t, e)
			}
			rec := &recorder{}
			e.start("lr", func(ctx context.Context, m *member.Message) error {
				rec.add(m)
				return m.Ack(ctx)
			}, member.WithRedis(viaProxy), member.WithClaimMinIdle(20*time.Second))
			if tc.afterStart != nil {
				tc.afterStart(t, e)
			}
			eventually(t, 5*time.Second, "the record whose answer was lost handled", func() bool {
				for _, h := range rec.all() {
					if h.eventID == "lost-0-0" {
						return true
					}
				}
				return false
			})
			if proxy.Dropped() != 1 {
				t.Fatalf("the proxy dropped %d answers, want 1", proxy.Dropped())
			}
			if rec.count() != rec.distinct() {
				t.Fatalf("%d records handled, %d distinct: want each once", rec.count(), rec.distinct())
			}
		})
	}
}
