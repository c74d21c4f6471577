package actors_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
)

// startForcing is startOnRedis with a two-second member lease, so that a
// member that stops heartbeating lets go of its shards within seconds.
func startForcing(t *testing.T, rs *redistest.Server) *actors.Coordinator {
	t.Helper()
	return startOnRedisWith(t, rs, actors.Config{
		Group: assign.Config{HeartbeatInterval: 200 * time.Millisecond, ReconcileInterval: 50 * time.Millisecond,
			MemberLease: 2 * time.Second, RebalanceTimeout: time.Second},
	})
}

func wantCode(t *testing.T, what string, err error, code protocol.ErrorCode) *protocol.Error {
	t.Helper()
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	return perr
}

// A forced reset under a member that stops heartbeating: a dry run names
// the member force would make hand off; a reset whose request ends before
// the member's lease gives up, names the member and leaves no hold (the
// member gets its shards back); one that may wait runs once the lease
// lapsed. A second forced reset while one holds shards, and a forced
// reset during a migration, are refused.
func TestForcedResetWaitsForTheReadersOrGivesUp(t *testing.T) {
	rs := redistest.Standalone(t)
	c := startForcing(t, rs)
	ctx := context.Background()
	two := 2
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{InitialShardCount: &two, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	reset := func(ctx context.Context, execute bool) (protocol.OffsetsResetResponse, error) {
		return c.ResetOffsets(ctx, "orders", "orders", protocol.OffsetsResetRequest{
			RequestedBy: "test", To: protocol.ResetToLatest, Execute: execute, Force: true})
	}
	join := func(id string) *protocol.HeartbeatRequest {
		t.Helper()
		req := joinReq(id)
		r := c.Heartbeat(ctx, "orders", "orders", id, req)
		if r.Status != protocol.StatusOK {
			t.Fatalf("join %s: %+v", id, r)
		}
		req.RequestID, req.MemberEpoch, req.MetadataVersion = id+"-hb", r.MemberEpoch, r.MetadataVersion
		req.OwnedShards = r.Assignment.AssignedShards
		return req
	}
	a := join("a")

	if dry, err := reset(ctx, false); err != nil || dry.Executed || !slices.Equal(dry.HandedOff, []string{"a"}) {
		t.Fatalf("forced dry run = %+v %v, want a named, nothing done", dry, err)
	}

	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err := reset(short, true)
	cancel()
	if perr := wantCode(t, "forced reset that cannot wait for a's lease", err, protocol.CodeGroupHasActiveMembers); !strings.Contains(perr.Message, "(a)") {
		t.Fatalf("message %q does not name a", perr.Message)
	}
	// No hold is left behind: a, still live, gets its shards back.
	if !poll.Wait(5*time.Second, 10*time.Millisecond, func() bool {
		r := c.Heartbeat(ctx, "orders", "orders", "a", a)
		a.MemberEpoch, a.MetadataVersion = r.MemberEpoch, r.MetadataVersion
		return r.Status == protocol.StatusOK && len(r.Assignment.AssignedShards) == 2
	}) {
		t.Fatal("a never got its shards back after the forced reset gave up")
	}

	// a stops heartbeating: the reset waits for its lease, then runs.
	start := time.Now()
	got, err := reset(ctx, true)
	if err != nil || !got.Executed || !slices.Equal(got.HandedOff, []string{"a"}) {
		t.Fatalf("forced reset = %+v %v, want executed with a handed off", got, err)
	}
	t.Logf("waited %v for a's lease", time.Since(start))

	// b holds the shards and hangs: while a forced reset waits for it, a
	// second one is refused.
	join("b")
	first := make(chan error, 1)
	go func() {
		_, err := reset(ctx, true)
		first <- err
	}()
	if !poll.Wait(5*time.Second, 5*time.Millisecond, func() bool {
		v, err := c.Assignments(ctx, "orders", "orders")
		return err == nil && len(v.TargetAssignment["b"]) == 0
	}) {
		t.Fatal("the first forced reset never held the shards out")
	}
	_, err = reset(ctx, true)
	wantCode(t, "a second forced reset", err, protocol.CodeOffsetsResetInProgress)
	if err := <-first; err != nil {
		t.Fatalf("the first forced reset: %v", err)
	}

	three := 3
	if _, err := c.Scale(ctx, "orders", protocol.ScaleRequest{TargetShardCount: &three, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	if !poll.Wait(5*time.Second, 10*time.Millisecond, func() bool {
		g, err := c.Group(ctx, "orders", "orders")
		return err == nil && g.ActiveMigration != nil
	}) {
		t.Fatal("the scale never reached the group")
	}
	_, err = reset(ctx, true)
	if perr := wantCode(t, "a forced reset during a migration", err, protocol.CodeActiveMigrationExists); !strings.Contains(perr.Message, "migration") {
		t.Fatalf("message %q names no migration", perr.Message)
	}
}
