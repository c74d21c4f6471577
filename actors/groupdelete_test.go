package actors_test

import (
	"context"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/redisops"
)

// A deleted group leaves no Redis consumer group on any shard key of the
// stream, those a migration added while it is still ACTIVE included: a
// later scale-in's drain proof counts every consumer group on a removed
// key. The stream's other groups stay.
func TestGroupDeleteDestroysRedisGroupOnEveryShardKey(t *testing.T) {
	rs := redistest.Standalone(t)
	c := startOnRedis(t, rs, false)
	ctx := context.Background()
	two, four := 2, 4
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{InitialShardCount: &two, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, "orders", "billing", protocol.CreateRequest{RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Scale(ctx, "orders", protocol.ScaleRequest{TargetShardCount: &four, RequestedBy: "test", Reason: "more"})
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.Migrations[0].State; st != protocol.MigrationActive {
		t.Fatalf("scale-out is %s, want ACTIVE", st)
	}
	ops := redisops.Wrap(rs.Client())
	for i := range four {
		if f, err := ops.Inspect(ctx, protocol.StreamKey("orders", i)); err != nil || f.Group("billing") == nil {
			t.Fatalf("shard %d before the delete = %+v %v, want group billing on it", i, f, err)
		}
	}
	if _, err := c.DeleteGroup(ctx, "orders", "billing", protocol.DeleteGroupRequest{RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	for i := range four {
		f, err := ops.Inspect(ctx, protocol.StreamKey("orders", i))
		if err != nil || f.Group("billing") != nil || f.Group("orders") == nil {
			t.Fatalf("shard %d after the delete = %+v %v, want group orders only", i, f, err)
		}
	}
}
