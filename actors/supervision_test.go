package actors

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestGroupThatKeepsPanickingComesBack: once a group's supervisor stops its
// actor (more panics than it restarts in its window), the group is not left
// without an actor until the process restarts. It fails closed for the cool
// down (RETRY to heartbeats, health DEGRADED, admin calls refused as store
// trouble rather than a dead letter), then reloads from the store and
// serves its members with their epochs.
func TestGroupThatKeepsPanickingComesBack(t *testing.T) {
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	// Long enough for the panics under the race detector to be seen
	// stopping the group before it reloads.
	const coolDown = 2 * time.Second
	c.env.groupCoolDown = coolDown
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	first := c.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	if first.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", first)
	}
	began := time.Now()
	var panicking atomic.Bool
	panicking.Store(true)
	c.env.testHooks.afterDecide = func(req *protocol.HeartbeatRequest) {
		if req.MemberID == "boom" && panicking.Load() {
			panic("injected")
		}
	}

	// One panic more than the supervisor restarts in its window, each
	// answered RETRY; the last stops the actor, and the cooling one that
	// replaces it reports the group failed.
	for i := range groupMaxRestarts + 1 {
		if resp := c.Heartbeat(ctx, "orders", "orders", "boom", join("boom")); resp.Status != protocol.StatusRetry {
			t.Fatalf("heartbeat that panicked (%d): %s", i, resp.Status)
		}
	}
	// The report must come within half the cool down: after it the group
	// could be serving again, and the failure would not be seen.
	var h protocol.Health
	if !poll.Soon(time.Until(began.Add(coolDown/2)), func() bool {
		h = c.Health(ctx)
		return h.Status == protocol.HealthDegraded && strings.Contains(h.Store.Message, "orders/orders")
	}) {
		t.Fatalf("the stopped group is not reported failed: %+v", h)
	}
	panicking.Store(false)
	cooling := time.Now()

	// Cooling down: the group answers, but only RETRY and store trouble.
	if resp := c.Heartbeat(ctx, "orders", "orders", "a", steady("a", first)); resp.Status != protocol.StatusRetry {
		t.Fatalf("heartbeat while the group cools down: %+v", resp)
	}
	var perr *protocol.Error
	if _, err := c.Group(ctx, "orders", "orders"); !errors.As(err, &perr) || perr.Code != protocol.CodeStoreUnavailable {
		t.Fatalf("group view while it cools down: %v", err)
	}

	// Then it reloads from the store: a keeps its epoch, health is UP.
	var resp protocol.HeartbeatResponse
	if !poll.Soon(20*time.Second, func() bool {
		resp = c.Heartbeat(ctx, "orders", "orders", "a", steady("a", first))
		return resp.Status == protocol.StatusOK
	}) {
		t.Fatalf("the group never came back: last answer %+v, health %+v", resp, c.Health(ctx))
	}
	if resp.MemberEpoch != first.MemberEpoch {
		t.Fatalf("after the reload a's epoch is %d, was %d", resp.MemberEpoch, first.MemberEpoch)
	}
	if waited := time.Since(cooling); waited < coolDown/2 {
		t.Fatalf("the group served again %v after it was stopped, before its cool down of %v", waited, coolDown)
	}
	if h := c.Health(ctx); h.Status != protocol.HealthUp {
		t.Fatalf("health after the reload: %+v", h)
	}
	if resp := c.Heartbeat(ctx, "orders", "orders", "boom", join("boom")); resp.Status != protocol.StatusOK {
		t.Fatalf("the member whose heartbeats panicked cannot join afterwards: %+v", resp)
	}
}
