package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
)

func startLimited(t *testing.T, store persistence.Store, cfg Config) *Coordinator {
	t.Helper()
	cfg.Store, cfg.AutoCreateGroups = store, true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// registrations lists the REGISTER_GROUP audit entries of prefix, by group.
func registrations(t *testing.T, store persistence.Store, prefix string) map[string]protocol.AuditEntry {
	t.Helper()
	recs, err := store.ListAudit(context.Background(), persistence.AuditQuery{StreamPrefix: prefix, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]protocol.AuditEntry{}
	for _, r := range recs {
		if r.Err != nil {
			t.Fatalf("audit entry %d does not decode: %v", r.Seq, r.Err)
		}
		if r.Entry.Operation == protocol.AuditRegisterGroup {
			if _, dup := out[r.Entry.ConsumerGroup]; dup {
				t.Errorf("group %s has two registration entries", r.Entry.ConsumerGroup)
			}
			out[r.Entry.ConsumerGroup] = r.Entry
		}
	}
	return out
}

// groupsOf counts the groups of prefix the coordinator runs.
func groupsOf(t *testing.T, c *Coordinator, prefix string) map[string]bool {
	t.Helper()
	all, err := c.Groups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, g := range all.Groups {
		if g.StreamPrefix == prefix {
			out[g.ConsumerGroup] = true
		}
	}
	return out
}

// A MEMBER that joins 600 groups that do not exist has at most
// MaxGroupsPerStream of them registered; the rest are answered RETRY with
// GROUP_LIMIT_REACHED, and every registered group has an audit entry
// naming the principal. An ADMIN caller still registers past the cap.
func TestJoinsOfAMemberRegisterAtMostTheStreamsCapOfGroups(t *testing.T) {
	store := pebbleStore(t)
	c := startLimited(t, store, Config{MaxGroupsPerStream: 256, MaxGroupRegistrationsPerPrincipal: 10000})
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	member := WithCaller(ctx, Caller{Principal: "member"})
	refused := 0
	for i := range 600 {
		resp := c.Heartbeat(member, "orders", fmt.Sprintf("g%03d", i), "m1", join("m1"))
		switch {
		case resp.Status == protocol.StatusRetry && resp.ErrorCode == protocol.CodeGroupLimitReached:
			refused++
		case resp.Status != protocol.StatusOK:
			t.Fatalf("join %d: %s %s %s", i, resp.Status, resp.ErrorCode, resp.Message)
		}
	}
	groups := groupsOf(t, c, "orders")
	if len(groups) != 256 || refused != 600-255 {
		t.Fatalf("%d groups, %d joins refused; want 256 (the default group and 255 registered), 345", len(groups), refused)
	}
	audited := registrations(t, store, "orders")
	for g := range groups {
		e, ok := audited[g]
		if g == "orders" {
			if ok {
				t.Errorf("the default group, an admin create, has a REGISTER_GROUP entry")
			}
			continue
		}
		if !ok || e.Principal != "member" || e.Result.Outcome != protocol.AuditAccepted {
			t.Errorf("group %s: audit entry %+v (found %v), want one naming member", g, e, ok)
		}
	}
	if len(audited) != 255 {
		t.Errorf("%d registration entries, want 255", len(audited))
	}
	admin := WithCaller(ctx, Caller{Principal: "root", Admin: true})
	if resp := c.Heartbeat(admin, "orders", "ops", "a1", join("a1")); resp.Status != protocol.StatusOK {
		t.Fatalf("admin join past the cap: %s %s %s", resp.Status, resp.ErrorCode, resp.Message)
	}
	if e, ok := registrations(t, store, "orders")["ops"]; !ok || e.Principal != "root" {
		t.Errorf("admin registration audit entry %+v (found %v), want one naming root", e, ok)
	}
}

// One principal registers at most MaxGroupRegistrationsPerPrincipal groups
// on the fly per window, across streams and through both producer routing
// and joins; another principal keeps its own budget, and the window's end
// gives the first one its budget back.
func TestRegistrationsOnTheFlyAreBoundedPerPrincipal(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	store := pebbleStore(t)
	c := startLimited(t, store, Config{MaxGroupRegistrationsPerPrincipal: 3, GroupRegistrationWindow: time.Hour, Now: clock})
	ctx := context.Background()
	for _, p := range []string{"a", "b"} {
		if _, err := c.CreateStream(ctx, p, protocol.CreateRequest{RequestedBy: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	alice := WithCaller(ctx, Caller{Principal: "alice"})
	for i, prefix := range []string{"a", "b", "a"} {
		if _, err := c.ProducerRouting(alice, prefix, fmt.Sprintf("p%d", i), true); err != nil {
			t.Fatalf("routing %d: %v", i, err)
		}
	}
	_, err := c.ProducerRouting(alice, "b", "p3", true)
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.CodeGroupLimitReached || perr.Code.HTTPStatus() != 409 {
		t.Fatalf("fourth registration: %v, want GROUP_LIMIT_REACHED (409)", err)
	}
	if resp := c.Heartbeat(alice, "a", "j", "m1", join("m1")); resp.ErrorCode != protocol.CodeGroupLimitReached {
		t.Fatalf("join past the budget: %s %s", resp.Status, resp.ErrorCode)
	}
	// An existing group is no registration: routing to it still works.
	if _, err := c.ProducerRouting(alice, "a", "p0", true); err != nil {
		t.Fatalf("routing to a registered group: %v", err)
	}
	bob := WithCaller(ctx, Caller{Principal: "bob"})
	if resp := c.Heartbeat(bob, "a", "j", "m1", join("m1")); resp.Status != protocol.StatusOK {
		t.Fatalf("another principal's join: %s %s", resp.Status, resp.ErrorCode)
	}
	now.Add(int64(time.Hour))
	if _, err := c.ProducerRouting(alice, "b", "p3", true); err != nil {
		t.Fatalf("registration in the next window: %v", err)
	}
	n := len(registrations(t, store, "a")) + len(registrations(t, store, "b"))
	if n != 5 {
		t.Errorf("%d registration entries, want 5", n)
	}
}
