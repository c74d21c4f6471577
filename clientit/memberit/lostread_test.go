package memberit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestLostReadAnswerIsReadFromPending: Redis runs an XREADGROUP for new
// entries, moving a record into the member's pending list, and the answer
// is lost (the connection closes). go-redis, with its default options,
// would send the read again, which finds nothing new, and the record would
// wait in the pending list for the claim min idle (20 s here); the member's
// reads go once, so the failure shows and the member reads its own pending
// entries next.
func TestLostReadAnswerIsReadFromPending(t *testing.T) {
	srv := redistest.Standalone(t)
	e := newEnvOn(t, srv.Client(), "lostread", 1)
	proxy := redistest.NewProxy(t, srv.Addr)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr}) // go-redis defaults: 3 retries
	t.Cleanup(func() { viaProxy.Close() })
	rec := &recorder{}
	e.start("lr", func(ctx context.Context, m *member.Message) error {
		rec.add(m)
		return m.Ack(ctx)
	}, member.WithRedis(viaProxy), member.WithClaimMinIdle(20*time.Second))
	e.publish(0, 1, "before")
	eventually(t, 10*time.Second, "the first record handled", func() bool { return rec.distinct() == 1 })

	proxy.DropAnswerContaining("lost-0-0")
	e.publish(0, 1, "lost")
	eventually(t, 5*time.Second, "the record whose read answer was lost handled", func() bool { return rec.distinct() == 2 })
	if proxy.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d answers, want 1", proxy.Dropped())
	}
	if n := rec.count(); n != 2 {
		t.Fatalf("%d records handled, want 2 (each once)", n)
	}
}
