package actors_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/redisops"
)

func errorCode(err error) protocol.ErrorCode {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr.Code
	}
	return ""
}

// A forced stream delete deletes its groups first, so that a member of
// one is told to stop reading (UNKNOWN_MEMBER_ID) and a join registers
// nothing; it drops the active migration with the record and, without
// deleteKeys, leaves the shard keys, without the deleted groups on them.
// The prefix can then be created anew.
func TestStreamDeleteStopsMembersAndKeepsKeys(t *testing.T) {
	rs := redistest.Standalone(t)
	c := startOnRedis(t, rs, true)
	ctx := context.Background()
	two, four := 2, 4
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{InitialShardCount: &two, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	a := c.Heartbeat(ctx, "orders", "orders", "a", joinReq("a"))
	if a.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", a)
	}
	scaled, err := c.Scale(ctx, "orders", protocol.ScaleRequest{TargetShardCount: &four, RequestedBy: "test", Reason: "more"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteStream(ctx, "orders", protocol.DeleteStreamRequest{RequestedBy: "test"})
	if errorCode(err) != protocol.CodeStreamHasGroups {
		t.Fatalf("delete without force: %v, want STREAM_HAS_GROUPS", err)
	}
	resp, err := c.DeleteStream(ctx, "orders", protocol.DeleteStreamRequest{RequestedBy: "test", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.DeletedGroups) != 1 || resp.DroppedMigration == "" || resp.DroppedMigration != scaled.Migrations[0].ReshardingID || len(resp.DeletedKeys) != 0 {
		t.Fatalf("forced delete answered %+v", resp)
	}
	hb := joinReq("a")
	hb.RequestID, hb.MemberEpoch = "a-2", a.MemberEpoch
	if got := c.Heartbeat(ctx, "orders", "orders", "a", hb); got.Status != protocol.StatusUnknownMemberID {
		t.Fatalf("the deleted group's member was answered %+v, want UNKNOWN_MEMBER_ID", got)
	}
	if got := c.Heartbeat(ctx, "orders", "orders", "b", joinReq("b")); got.Status == protocol.StatusOK || len(c.Streams()) != 0 {
		t.Fatalf("a join after the delete: %+v, streams %v", got, c.Streams())
	}
	ops := redisops.Wrap(rs.Client())
	for i := range four {
		f, err := ops.Inspect(ctx, protocol.StreamKey("orders", i))
		if err != nil || !f.Exists || len(f.Groups) != 0 {
			t.Fatalf("shard %d after the delete = %+v %v, want the key without groups", i, f, err)
		}
	}
	if _, err := c.DeleteStream(ctx, "orders", protocol.DeleteStreamRequest{RequestedBy: "test", Force: true}); errorCode(err) != protocol.CodeStreamNotFound {
		t.Fatalf("delete again: %v, want STREAM_NOT_FOUND", err)
	}
	again, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{InitialShardCount: &two, RequestedBy: "test"})
	if err != nil || again.ShardCount != 2 {
		t.Fatalf("create anew: %+v %v", again, err)
	}
	if got := c.Heartbeat(ctx, "orders", "orders", "b", joinReq("b")); got.Status != protocol.StatusOK {
		t.Fatalf("join after the create anew: %+v", got)
	}
}

// Without force, an active migration refuses the delete even once the
// stream has no group left.
func TestStreamDeleteRefusedDuringMigration(t *testing.T) {
	rs := redistest.Standalone(t)
	c := startOnRedis(t, rs, false)
	ctx := context.Background()
	one, two := 1, 2
	if _, err := c.CreateStream(ctx, "pay", protocol.CreateRequest{InitialShardCount: &one, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Scale(ctx, "pay", protocol.ScaleRequest{TargetShardCount: &two, RequestedBy: "test", Reason: "more"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteGroup(ctx, "pay", "pay", protocol.DeleteGroupRequest{RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.DeleteStream(ctx, "pay", protocol.DeleteStreamRequest{RequestedBy: "test"})
	if errorCode(err) != protocol.CodeActiveMigrationExists {
		t.Fatalf("delete during a migration: %v, want ACTIVE_MIGRATION_EXISTS", err)
	}
	if _, err := c.DeleteStream(ctx, "pay", protocol.DeleteStreamRequest{RequestedBy: "test", Force: true, DeleteKeys: true}); err != nil {
		t.Fatal(err)
	}
	if n := rs.Client().Exists(ctx, "pay:0", "pay:1").Val(); n != 0 {
		t.Fatalf("%d shard keys left after deleteKeys", n)
	}
}
