package memberit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// cutTransport fails every heartbeat while cut is set, without sending it:
// the member's path to the coordinator is broken, the coordinator is not.
type cutTransport struct {
	cut  atomic.Bool
	next *http.Transport
}

func (c *cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() && strings.HasSuffix(req.URL.Path, "/heartbeat") {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("test: heartbeats cut")
	}
	return c.next.RoundTrip(req)
}

// TestHooksTellResumed: a member whose own lease lapses while the
// coordinator still counts it live (the member's lease is the shorter,
// and its heartbeats are cut for longer than it) stops reading — OnLeaseLost,
// OnRevoked with reason lease lost — and, when the next heartbeat is
// answered OK without a fence, reads the same shards again: OnAssigned with
// reason resumed, not assigned, and records published meanwhile are handled.
func TestHooksTellResumed(t *testing.T) {
	t.Parallel()
	const (
		prefix      = "resume"
		memberLease = time.Second
	)
	rdb := redistest.Standalone(t).Client()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: assign.Config{
		HeartbeatInterval: testInterval, ReconcileInterval: testReconcile, MemberLease: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
	}})
	coord.CreateStream(prefix, 2)
	ctx := context.Background()
	if err := redistest.CreateShards(ctx, rdb, prefix, 2, prefix); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, coord: coord, rdb: rdb, prefix: prefix, shards: 2}
	tr := &cutTransport{next: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(tr.next.CloseIdleConnections)
	var h hookLog
	var rec recorder
	handler := func(ctx context.Context, msg *member.Message) error {
		rec.add(msg)
		return msg.Ack(ctx)
	}
	r := e.start("rs-res", handler, member.WithHooks(h.hooks()), member.WithMemberLease(memberLease),
		member.WithHTTPClient(&http.Client{Transport: tr}))
	eventually(t, 10*time.Second, "OnAssigned with both shards", func() bool { return h.has("assigned:assigned [0 1]") })
	epochBefore := r.rt.Status().Members[0].Epoch

	tr.cut.Store(true)
	eventually(t, 5*memberLease, "OnLeaseLost and OnRevoked with reason lease lost", func() bool {
		h.mu.Lock()
		lost := h.leaseLost
		h.mu.Unlock()
		return lost == 1 && h.has("revoked:lease lost [0 1]")
	})
	if st := r.rt.Status(); st.Ready || st.Members[0].State != member.StateSuspended {
		t.Fatalf("a member whose lease lapsed: %+v", st)
	}
	e.publish(0, 2, "while-suspended")
	e.publish(1, 2, "while-suspended")

	tr.cut.Store(false)
	eventually(t, 5*time.Second, "OnAssigned with reason resumed", func() bool { return h.has("assigned:resumed [0 1]") })
	eventually(t, 10*time.Second, "the records published while suspended handled", func() bool { return rec.distinct() == 4 })
	st := r.rt.Status()
	if !st.Ready || st.Members[0].Epoch < epochBefore {
		t.Fatalf("after resuming: %+v (epoch before %d)", st, epochBefore)
	}
	for _, c := range h.all() {
		if c == "revoked:fenced [0 1]" {
			t.Fatalf("the member was fenced, not resumed: %v", h.all())
		}
	}
	if n := strings.Count(strings.Join(h.all(), "\n"), "assigned:assigned"); n != 1 {
		t.Fatalf("OnAssigned with reason assigned %d times (a rejoin?): %v", n, h.all())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestHooksTellRedisFailed: a member whose Redis goes away (killed, or
// frozen with SIGSTOP) gives its shards back after three failed reads and
// hears OnRevoked once with every shard and the reason redis failed (a
// graceful give-up: not Lost); once Redis answers again it rejoins and
// hears OnAssigned with reason assigned.
func TestHooksTellRedisFailed(t *testing.T) {
	t.Parallel()
	tests := redisOutages()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const prefix, shards = "redisgone", 2
			ctx := context.Background()
			srv := redistest.Standalone(t)
			t.Cleanup(func() { _ = srv.Resume() }) // a frozen server must be resumed before it is stopped
			rdb := quickClient(t, srv)
			e := newEnvOn(t, rdb, prefix, shards)
			var h hookLog
			handler := func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) }
			r := e.start("rs-rf", handler, member.WithHooks(h.hooks()))
			eventually(t, 10*time.Second, "OnAssigned with both shards", func() bool { return h.has("assigned:assigned [0 1]") })

			if err := tc.break_(srv); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "OnRevoked with reason redis failed and both shards", func() bool {
				return h.has("revoked:redis failed [0 1]")
			})
			if member.ReasonRedisFailed.Lost() {
				t.Fatal("a give-up after Redis failures is graceful, not Lost")
			}
			eventually(t, 10*time.Second, "the coordinator sees the shards given back", func() bool {
				return len(assignments(t, e.coord, prefix)["rs-rf-m0"]) == 0
			})
			for _, c := range h.all() {
				if strings.HasPrefix(c, "revoked:") && c != "revoked:redis failed [0 1]" {
					t.Fatalf("OnRevoked with another reason or set: %v", h.all())
				}
			}

			if err := tc.heal(ctx, srv); err != nil {
				t.Fatal(err)
			}
			if err := redistest.CreateShards(ctx, rdb, prefix, shards, prefix); err != nil {
				t.Fatal(err) // a restarted server lost its streams
			}
			eventually(t, 20*time.Second, "OnAssigned again after the rejoin", func() bool {
				n := 0
				for _, c := range h.all() {
					if c == "assigned:assigned [0 1]" {
						n++
					}
				}
				return n == 2 && r.rt.Ready()
			})
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
