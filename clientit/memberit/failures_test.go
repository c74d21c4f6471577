package memberit_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestRunFailsOnWhatWillNotHeal runs members against the real coordinator
// with a mistake no retry heals: Run must return a typed error naming the
// stream within one heartbeat (the join), and Status must say FAILED.
func TestRunFailsOnWhatWillNotHeal(t *testing.T) {
	t.Parallel()
	rdb := redistest.Standalone(t).Client()
	open := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig()})
	open.CreateStream("orders", 2)
	strict := coordtest.Start(t, "", coordtest.Options{Group: testGroupConfig()})
	strict.CreateStream("orders", 2)
	authed := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig(), Auth: &coordtest.Auth{}})
	authed.CreateStream("orders", 2)
	if err := redistest.CreateShards(context.Background(), rdb, "orders", 2, "orders"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		coord *coordtest.Server
		opts  []member.Opt
		// check holds for the error Run returned.
		check func(t *testing.T, err error)
	}{
		{
			name: "unknown stream", coord: open, opts: []member.Opt{member.WithStream("ordres")},
			check: func(t *testing.T, err error) {
				var nf *member.StreamNotFoundError
				if !errors.As(err, &nf) || nf.Stream != "ordres" || !errors.Is(err, coordclient.ErrStreamNotFound) {
					t.Fatalf("Run = %v, want a StreamNotFoundError for ordres", err)
				}
				if !strings.Contains(err.Error(), `"ordres"`) {
					t.Fatalf("error %q does not name the stream", err)
				}
			},
		},
		{
			name: "unknown group without auto-create", coord: strict,
			opts: []member.Opt{member.WithStream("orders"), member.WithGroup("billing")},
			check: func(t *testing.T, err error) {
				var nf *member.GroupNotFoundError
				if !errors.As(err, &nf) || nf.Group != "billing" || nf.Stream != "orders" || !errors.Is(err, coordclient.ErrGroupNotFound) {
					t.Fatalf("Run = %v, want a GroupNotFoundError for orders/billing", err)
				}
			},
		},
		{
			name: "no credentials", coord: authed, opts: []member.Opt{member.WithStream("orders")},
			check: func(t *testing.T, err error) {
				var ae *member.AuthError
				if !errors.As(err, &ae) || ae.StatusCode != 401 || !errors.Is(err, coordclient.ErrUnauthorized) {
					t.Fatalf("Run = %v, want an AuthError 401", err)
				}
			},
		},
		{
			name: "credentials without the MEMBER role", coord: authed,
			opts: []member.Opt{member.WithStream("orders"), member.WithBasicAuth(coordtest.UserReader, coordtest.Password(coordtest.UserReader))},
			check: func(t *testing.T, err error) {
				var ae *member.AuthError
				if !errors.As(err, &ae) || ae.StatusCode != 403 || !errors.Is(err, coordclient.ErrForbidden) {
					t.Fatalf("Run = %v, want an AuthError 403", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]member.Opt{member.WithCoordinator(tc.coord.URL), member.WithRedis(rdb),
				member.WithBaseID("doomed"), member.WithConcurrency(2), member.WithMemberLease(testLease),
				member.WithBlock(testBlock), member.WithLogger(testLogger(t))}, tc.opts...)
			rt, err := member.New(func(context.Context, *member.Message) error { return nil }, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err = rt.Run(ctx)
			took := time.Since(start)
			if err == nil || ctx.Err() != nil {
				t.Fatalf("Run = %v (ctx %v), want an error before the context ends", err, ctx.Err())
			}
			tc.check(t, err)
			// Within one heartbeat: the join is the first, and it is
			// answered at once; the rest is the leave of the other member.
			if took > testInterval+time.Second {
				t.Errorf("Run took %v to fail, want about one heartbeat", took)
			}
			st := rt.Status()
			if st.Ready {
				t.Errorf("a failed runtime reports ready: %+v", st)
			}
			failed := 0
			for _, m := range st.Members {
				if m.State == member.StateFailed && m.Err != nil {
					failed++
				}
			}
			if failed == 0 {
				t.Errorf("no member reports FAILED with its error: %+v", st.Members)
			}
		})
	}
}

// TestDuplicateMemberIDIsReported: a second process using a live member's
// id keeps retrying (it may heal: the first may go away) and says why in
// Status; the first keeps its shards. Once the first leaves, the second
// joins and is ready.
func TestDuplicateMemberIDIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "dup", 2)
	handler := func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) }
	retries := &retryLog{}
	first := e.start("twin", handler, member.WithLogger(slog.New(retries)))
	eventually(t, 10*time.Second, "the first process is ready", first.rt.Ready)
	if first.rt.Status().Members[0].State != member.StateActive {
		t.Fatalf("first: %+v", first.rt.Status())
	}
	second := e.start("twin", handler)
	eventually(t, 10*time.Second, "the second process says the id is in use", func() bool {
		m := second.rt.Status().Members[0]
		return strings.Contains(m.Reason, "another process is using this member id") && m.State != member.StateActive
	})
	if second.rt.Ready() {
		t.Fatal("the duplicate reports ready")
	}
	if !first.rt.Ready() || len(first.rt.Status().Members[0].Owned) != 2 {
		t.Fatalf("the first process lost its shards to a duplicate: %+v", first.rt.Status())
	}
	// The first one's held heartbeats are let go (RETRY) whenever the
	// second one's arrive: it says so, not that the coordinator is down.
	eventually(t, 10*time.Second, "the first process logs a RETRY", func() bool { return len(retries.reasons()) > 0 })
	for _, r := range retries.reasons() {
		if !strings.Contains(r, "newer heartbeat under this member id") || strings.Contains(r, "store unavailable") {
			t.Fatalf("the holder's RETRY reason %q, want one naming a newer heartbeat under its id", r)
		}
	}
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	if first.rt.Ready() || first.rt.Status().Members[0].State != member.StateStopped {
		t.Fatalf("a stopped runtime: %+v", first.rt.Status())
	}
	eventually(t, 10*time.Second, "the second process takes over the id", func() bool {
		return second.rt.Ready() && len(second.rt.Status().Members[0].Owned) == 2
	})
}

// retryLog is a slog handler that keeps the reason of every "coordinator
// answered RETRY" line.
type retryLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *retryLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *retryLog) WithGroup(string) slog.Handler            { return l }
func (l *retryLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "coordinator answered RETRY") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			l.mu.Lock()
			l.seen = append(l.seen, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *retryLog) reasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}
