package memberit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/etcdtest"
)

// TestMemberKeepsItsLeaseAcrossAFrozenURL: a member is given two URLs of
// one coordinator, the first through a TCP proxy. The proxy stops moving
// bytes (a frozen replica, as the network sees it: connections open,
// nothing answered), with a held heartbeat in it. The member's heartbeats
// are hedged to the second URL within the bound, so for three leases after
// the freeze its lease never lapses, every heartbeat answer renews it, and
// a record published meanwhile is handled. Before, the client stayed on
// the first URL after each timeout and the member failed closed.
func TestMemberKeepsItsLeaseAcrossAFrozenURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "frozenurl", 1)
	proxy := etcdtest.NewProxy(t, strings.TrimPrefix(e.coord.URL, "http://"))

	lost := make(chan string, 4)
	beats := make(chan member.HeartbeatEvent, 1024)
	hooks := member.Hooks{
		OnLeaseLost: func(_ context.Context, id string) { lost <- id },
		OnHeartbeat: func(_ context.Context, ev member.HeartbeatEvent) {
			select {
			case beats <- ev:
			default: // the test reads them; a full buffer only drops events it does not need
			}
		},
	}
	handled := make(chan string, 16)
	r := e.start("rs-frozen", func(ctx context.Context, m *member.Message) error {
		handled <- m.Fields["eventId"].(string)
		return m.Ack(ctx)
	}, member.WithCoordinator(proxy.URL, e.coord.URL), member.WithHooks(hooks))

	eventually(t, 15*time.Second, "the member owns the shard", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rs-frozen-m0"]) == 1
	})
	// Steady: the member's heartbeats are held now (through the proxy).
	awaitHandled := func(id string) {
		t.Helper()
		select {
		case got := <-handled:
			if got != id {
				t.Fatalf("handled %s, want %s", got, id)
			}
		case <-time.After(testLease):
			t.Fatalf("record %s not handled within a lease", id)
		}
	}
	e.publish(0, 1, "before")
	awaitHandled("before-0-0")

	for len(beats) > 0 {
		<-beats
	}
	proxy.Pause()
	frozenAt := time.Now()
	oks := 0
	for time.Since(frozenAt) < 3*testLease {
		select {
		case id := <-lost:
			t.Fatalf("%s lost its lease %v after the first URL froze (%d answers renewed it before)", id, time.Since(frozenAt), oks)
		case ev := <-beats:
			if ev.Err == nil && ev.Status == string(protocol.StatusOK) {
				oks++
			}
		case <-time.After(testLease):
			t.Fatalf("no heartbeat outcome for a lease after the first URL froze")
		}
	}
	if oks < 3 {
		t.Fatalf("%d OK answers in three leases after the first URL froze; want the member renewed through the second URL", oks)
	}
	e.publish(0, 1, "frozen")
	awaitHandled("frozen-0-0")
	select {
	case id := <-lost:
		t.Fatalf("%s lost its lease", id)
	default:
	}
	if got := assignments(t, e.coord, e.prefix)["rs-frozen-m0"]; len(got) != 1 {
		t.Fatalf("the member holds %v after the freeze, want its shard", got)
	}
	proxy.Resume()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
