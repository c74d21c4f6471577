package actors_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/redisops"
)

// An offsets reset on real Redis: a dry run plans and changes nothing; an
// executed one moves the group on the shards asked (to an id, a time, the
// start or the end) and leaves its pending entries; while a live member
// holds a shard it is refused, and once the member left it goes through.
func TestResetOffsetsMovesTheGroupOnlyWhenNobodyReads(t *testing.T) {
	rs := redistest.Standalone(t)
	c := startOnRedis(t, rs, false)
	ctx := context.Background()
	two := 2
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{InitialShardCount: &two, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	rdb := rs.Client()
	// Shard 0 gets entries at ms 1000, 2000, 3000; the group reads two.
	for _, ms := range []int{1000, 2000, 3000} {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", ID: strconv.Itoa(ms) + "-0", Values: []any{"k", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "c", Streams: []string{"orders:0", ">"}, Count: 2}).Err(); err != nil {
		t.Fatal(err)
	}
	ops := redisops.Wrap(rdb)
	stands := func(shard int) (string, int64) {
		t.Helper()
		f, err := ops.Inspect(ctx, protocol.StreamKey("orders", shard))
		if err != nil || f.Group("orders") == nil {
			t.Fatalf("shard %d: %+v %v", shard, f, err)
		}
		return f.Group("orders").LastDeliveredID, f.Group("orders").Pending
	}
	reset := func(req protocol.OffsetsResetRequest) (protocol.OffsetsResetResponse, error) {
		req.RequestedBy = "test"
		return c.ResetOffsets(ctx, "orders", "orders", req)
	}

	dry, err := reset(protocol.OffsetsResetRequest{To: protocol.ResetToEarliest})
	if err != nil || dry.Executed || len(dry.Shards) != 2 || dry.Shards[0].CurrentLastDeliveredID != "2000-0" || dry.Shards[0].NewLastDeliveredID != "0-0" {
		t.Fatalf("dry run = %+v %v", dry, err)
	}
	if id, _ := stands(0); id != "2000-0" {
		t.Fatalf("a dry run moved the group to %s", id)
	}

	steps := []struct {
		req  protocol.OffsetsResetRequest
		want string
	}{
		{protocol.OffsetsResetRequest{To: protocol.ResetToID, ID: "1000-0"}, "1000-0"},
		{protocol.OffsetsResetRequest{To: protocol.ResetToTime, Time: time.UnixMilli(3000).UTC().Format(time.RFC3339Nano)}, "2000-0"},
		{protocol.OffsetsResetRequest{To: protocol.ResetToLatest}, "3000-0"},
		{protocol.OffsetsResetRequest{To: protocol.ResetToEarliest}, "0-0"},
	}
	for _, s := range steps {
		s.req.Execute, s.req.Shards = true, []int{0}
		got, err := reset(s.req)
		if err != nil || !got.Executed || len(got.Shards) != 1 || got.Shards[0].NewLastDeliveredID != s.want {
			t.Fatalf("reset %+v = %+v %v, want shard 0 only, to %s", s.req, got, err, s.want)
		}
		if id, pending := stands(0); id != s.want || pending != 2 {
			t.Fatalf("after reset %+v: group at %s with %d pending, want %s with the 2 pending kept", s.req, id, pending, s.want)
		}
	}

	for _, bad := range []protocol.OffsetsResetRequest{
		{To: "SOMEWHERE"}, {To: protocol.ResetToID, ID: "x"}, {To: protocol.ResetToTime, Time: "yesterday"},
		{To: protocol.ResetToEarliest, ID: "1-0"}, {To: protocol.ResetToEarliest, Shards: []int{7}},
	} {
		var perr *protocol.Error
		if _, err := reset(bad); !errors.As(err, &perr) || perr.Code != protocol.CodeInvalidRequest {
			t.Errorf("reset %+v: %v, want INVALID_REQUEST", bad, err)
		}
	}

	a := c.Heartbeat(ctx, "orders", "orders", "a", joinReq("a"))
	if a.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", a)
	}
	_, err = reset(protocol.OffsetsResetRequest{To: protocol.ResetToLatest, Execute: true})
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.CodeGroupHasActiveMembers || !strings.Contains(perr.Message, "a") {
		t.Fatalf("reset with a live member: %v, want GROUP_HAS_ACTIVE_MEMBERS naming it", err)
	}
	if id, _ := stands(0); id != "0-0" {
		t.Fatalf("a refused reset moved the group to %s", id)
	}
	if plan, err := reset(protocol.OffsetsResetRequest{To: protocol.ResetToLatest}); err != nil || len(plan.Shards[0].Owners) != 1 || plan.Shards[0].Owners[0] != "a" {
		t.Fatalf("dry run with a live member = %+v %v, want it named as the reader", plan, err)
	}
	leave := joinReq("a")
	leave.RequestID, leave.MemberEpoch, leave.MetadataVersion = "a-leave", protocol.EpochLeave, a.MetadataVersion
	if r := c.Heartbeat(ctx, "orders", "orders", "a", leave); r.Status != protocol.StatusOK {
		t.Fatalf("leave: %+v", r)
	}
	if got, err := reset(protocol.OffsetsResetRequest{To: protocol.ResetToLatest, Execute: true}); err != nil || !got.Executed {
		t.Fatalf("reset after the member left = %+v %v", got, err)
	}
	if id, _ := stands(0); id != "3000-0" {
		t.Fatalf("after the reset to latest the group is at %s", id)
	}
}
