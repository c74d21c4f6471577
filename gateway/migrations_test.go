package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/redisops"
)

func scale(n int) map[string]any {
	return map[string]any{"targetShardCount": n, "requestedBy": "ops", "reason": "load"}
}

func TestScaleOutReassignsAndRollsBack(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	s.JSON(http.MethodPost, base+"/streams/orders/groups/billing", `{"requestedBy":"ops"}`, http.StatusCreated, nil)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	before := a.Version

	var resp protocol.ScaleResponse
	s.JSON(http.MethodPost, base+"/streams/orders/scale", scale(6), http.StatusAccepted, &resp)
	if resp.TargetShardCount != 6 || !slices.Equal(resp.AffectedConsumerGroups, []string{"billing", "orders"}) ||
		len(resp.Migrations) != 2 || resp.Migrations[0].State != protocol.MigrationActive ||
		resp.Migrations[0].ReshardingID != resp.Migrations[1].ReshardingID {
		t.Fatalf("scale answer = %+v", resp)
	}
	id := resp.Migrations[0].ReshardingID
	// Producers see the new count at once; members converge onto it.
	var r protocol.ProducerRoutingResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders/producer-routing", nil, http.StatusOK, &r)
	if r.ShardCount != 6 || len(r.Shards) != 6 || r.MetadataVersion <= before {
		t.Fatalf("routing after scale-out = %+v", r)
	}
	coordtest.Converge(t, s, 8, a, b)
	if len(a.Owned)+len(b.Owned) != 6 || len(a.Owned) != 3 {
		t.Fatalf("after scale-out a=%v b=%v", a.Owned, b.Owned)
	}
	// One migration at a time.
	status, raw := s.Do(http.MethodPost, base+"/streams/orders/scale", scale(8))
	if status != http.StatusConflict || !contains(raw, protocol.CodeActiveMigrationExists) {
		t.Fatalf("second scale: %d %s", status, raw)
	}
	var g protocol.GroupResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/billing", nil, http.StatusOK, &g)
	if g.ShardCount != 6 || g.ActiveMigration == nil || g.ActiveMigration.ReshardingID != id {
		t.Fatalf("billing during the migration = %+v", g)
	}
	var ms protocol.MigrationsResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/migrations", nil, http.StatusOK, &ms)
	if len(ms.Migrations) != 1 || ms.ActiveReshardingID == nil || *ms.ActiveReshardingID != id {
		t.Fatalf("migrations = %+v", ms)
	}

	var m protocol.Migration
	s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/migrations/"+id+"/rollback",
		`{"requestedBy":"ops","reason":"oops"}`, http.StatusAccepted, &m)
	if m.State != protocol.MigrationRolledBack {
		t.Fatalf("rollback = %+v", m)
	}
	s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/migrations/"+id+"/rollback",
		`{"requestedBy":"ops","reason":"again"}`, http.StatusAccepted, &m)
	if m.State != protocol.MigrationRolledBack {
		t.Fatalf("repeated rollback = %+v", m)
	}
	coordtest.Converge(t, s, 8, a, b)
	if len(a.Owned)+len(b.Owned) != 2 {
		t.Fatalf("after rollback a=%v b=%v", a.Owned, b.Owned)
	}
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders/migrations/"+id, nil, http.StatusOK, &m)
	if m.State != protocol.MigrationRolledBack || m.FromShardCount != 2 || m.ToShardCount != 6 {
		t.Fatalf("migration record = %+v", m)
	}
}

func TestScaleInKeepsRemovedShardsUntilCompleted(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	coordtest.Converge(t, s, 4, a)

	// The compatibility path scales the whole stream and answers a Migration.
	var m protocol.Migration
	s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/scale", scale(1), http.StatusAccepted, &m)
	if m.State != protocol.MigrationActive || m.FromShardCount != 4 || m.ToShardCount != 1 {
		t.Fatalf("scale-in = %+v", m)
	}
	var r protocol.ProducerRoutingResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders/producer-routing", nil, http.StatusOK, &r)
	if r.ShardCount != 1 || len(r.Shards) != 1 {
		t.Fatalf("producers must stop routing to removed shards at once: %+v", r)
	}
	// Removed shards stay readable so nothing is stranded.
	coordtest.Converge(t, s, 4, a)
	if !slices.Equal(a.Owned, []int{0, 1, 2, 3}) {
		t.Fatalf("removed shards left assignment before the drain: %v", a.Owned)
	}
	// Past ACTIVE no rollback... but an operator can complete it.
	s.JSON(http.MethodPost, base+"/streams/orders/migrations/"+m.ReshardingID+"/complete",
		`{"requestedBy":"ops","reason":"drained by hand"}`, http.StatusAccepted, &m)
	if m.State != protocol.MigrationDeprecated {
		t.Fatalf("complete = %+v", m)
	}
	coordtest.Converge(t, s, 4, a)
	if !slices.Equal(a.Owned, []int{0}) {
		t.Fatalf("after completion a owns %v", a.Owned)
	}
	status, raw := s.Do(http.MethodPost, base+"/streams/orders/groups/orders/migrations/"+m.ReshardingID+"/rollback",
		`{"requestedBy":"ops","reason":"too late"}`)
	if status != http.StatusUnprocessableEntity || !contains(raw, protocol.CodeRollbackNotAllowed) {
		t.Fatalf("rollback of a finished migration: %d %s", status, raw)
	}
	// Scaling to the current count is a no-op migration.
	var resp protocol.ScaleResponse
	s.JSON(http.MethodPost, base+"/streams/orders/scale", scale(1), http.StatusAccepted, &resp)
	if len(resp.Migrations) != 1 || resp.Migrations[0].ReshardingID != protocol.NoopReshardingID ||
		resp.Migrations[0].State != protocol.MigrationDeprecated {
		t.Fatalf("noop scale = %+v", resp)
	}
	// Zero is a valid target.
	s.JSON(http.MethodPost, base+"/streams/orders/scale", scale(0), http.StatusAccepted, &resp)
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders/producer-routing", nil, http.StatusOK, &r)
	if r.ShardCount != 0 || len(r.Shards) != 0 {
		t.Fatalf("routing after scale to 0 = %+v", r)
	}
}

func TestConsumptionReportsProgress(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 1)
	m := coordtest.NewMember("a", "orders", "orders")
	m.Beat(s)
	req := m.Request()
	req.ShardProgress = []protocol.ShardProgress{{
		Shard: protocol.Shard{ShardIndex: 0}, StreamKey: "orders:0", LastDeliveredID: "5-0", LastAckedID: "4-0", PendingCount: 1,
	}}
	if resp := s.Heartbeat("orders", "orders", req); resp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat with progress: %s", resp.Status)
	}
	var c protocol.ConsumptionResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/consumption", nil, http.StatusOK, &c)
	if len(c.Progress) != 1 || c.Progress[0].LastDeliveredID != "5-0" || c.Progress[0].MemberID != "a" ||
		c.Progress[0].PendingCount != 1 || c.Progress[0].StreamKey != "orders:0" {
		t.Fatalf("consumption = %+v", c)
	}
}

// TestScaleOfAStreamWithoutGroupsAnswersItsMigration: a stream whose
// groups were all deleted still scales (its shard count changes, and the
// migration blocks the next scale until it ends), so the answer names that
// migration, though no group is affected: an empty migrations[] told the
// client nothing was started, and its next scale met
// ACTIVE_MIGRATION_EXISTS for a migration it was never told of. A scale
// to the current count answers the no-op the same way.
func TestScaleOfAStreamWithoutGroupsAnswersItsMigration(t *testing.T) {
	t.Parallel()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb)})
	s.CreateStream("orders", 4)
	s.JSON(http.MethodDelete, base+"/streams/orders/groups/orders", `{"requestedBy":"ops"}`, http.StatusOK, nil)

	var resp protocol.ScaleResponse
	s.JSON(http.MethodPost, base+"/streams/orders/scale", scale(2), http.StatusAccepted, &resp)
	if len(resp.AffectedConsumerGroups) != 0 || len(resp.Migrations) != 1 {
		t.Fatalf("scale of a stream without groups = %+v, want no group and its one migration", resp)
	}
	m := resp.Migrations[0]
	if m.ReshardingID == protocol.NoopReshardingID || m.State != protocol.MigrationActive || m.FromShardCount != 4 || m.ToShardCount != 2 {
		t.Fatalf("migration answered = %+v, want ACTIVE 4→2", m)
	}
	// It is the migration the next scale is refused for, and a group
	// created now sees it and the new count.
	status, raw := s.Do(http.MethodPost, base+"/streams/orders/scale", scale(3))
	if status != http.StatusConflict || !strings.Contains(string(raw), m.ReshardingID) {
		t.Fatalf("next scale: %d %s, want 409 naming %s", status, raw, m.ReshardingID)
	}
	var g protocol.GroupResponse
	s.JSON(http.MethodPost, base+"/streams/orders/groups/late", `{"requestedBy":"ops"}`, http.StatusCreated, &g)
	if g.ShardCount != 2 || g.ActiveMigration == nil || g.ActiveMigration.ReshardingID != m.ReshardingID {
		t.Fatalf("group created after the scale = %+v", g)
	}
	s.JSON(http.MethodDelete, base+"/streams/orders/groups/late", `{"requestedBy":"ops"}`, http.StatusOK, nil)
	// The operator can end it by its id without any group.
	s.JSON(http.MethodPost, base+"/streams/orders/migrations/"+m.ReshardingID+"/complete",
		`{"requestedBy":"ops","reason":"no consumers"}`, http.StatusAccepted, &m)
	if m.State != protocol.MigrationDeprecated {
		t.Fatalf("complete = %+v", m)
	}
	s.JSON(http.MethodPost, base+"/streams/orders/scale", scale(2), http.StatusAccepted, &resp)
	if len(resp.AffectedConsumerGroups) != 0 || len(resp.Migrations) != 1 || resp.Migrations[0].ReshardingID != protocol.NoopReshardingID {
		t.Fatalf("scale to the current count without groups = %+v, want the no-op", resp)
	}
}
