package actors_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/redisops"
)

func startAutoscaling(t *testing.T, store persistence.Store, rdb redis.UniversalClient) *actors.Coordinator {
	t.Helper()
	c, err := actors.Start(context.Background(), actors.Config{
		Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AutoCreateGroups: true,
		Redis: redisops.Wrap(rdb), ShardMemory: collector.RedisMemory(rdb), RedisTimeout: 2 * time.Second,
		ProducerRoutingLease: 200 * time.Millisecond, DrainCheckInterval: 50 * time.Millisecond,
		AutoscaleInterval: 50 * time.Millisecond, MaxShards: 16,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func closeCoordinator(t *testing.T, c *actors.Coordinator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func fill(t *testing.T, rdb redis.UniversalClient, key string, n int) {
	t.Helper()
	pipe := rdb.Pipeline()
	for i := range n {
		pipe.XAdd(context.Background(), &redis.XAddArgs{Stream: key, NoMkStream: true, Values: []any{"i", i}})
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func codeOf(err error) protocol.ErrorCode {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr.Code
	}
	return ""
}

// TestAutoscaleScalesOutAndDryRunOnlyReports: with real Redis, a stream
// in mode on whose shard passes maxShardLength scales out by itself
// through a migration that completes; a stream in dry-run past the same
// bound keeps its count and has an audit entry naming what it would have
// done; both policies survive a restart.
func TestAutoscaleScalesOutAndDryRunOnlyReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	dir := t.TempDir()
	store, err := persistence.OpenPebble(dir, persistence.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := startAutoscaling(t, store, rdb)
	for _, prefix := range []string{"orders", "payments"} {
		if _, err := c.CreateStream(ctx, prefix, protocol.CreateRequest{RequestedBy: "t", InitialShardCount: ptr(2)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.Autoscale(ctx, "orders"); err != nil || got.Policy.Mode != protocol.AutoscaleOff || got.LastDecision != nil {
		t.Fatalf("a policy never set: %+v, %v; want mode off and no decision", got, err)
	}
	if _, err := c.Autoscale(ctx, "nope"); codeOf(err) != protocol.CodeStreamNotFound {
		t.Fatalf("an unknown stream: %v, want STREAM_NOT_FOUND", err)
	}
	for name, req := range map[string]protocol.AutoscaleRequest{
		"above --max-shards":  {Mode: "on", MaxShardLength: ptr[int64](100), MaxShards: ptr(32), RequestedBy: "t"},
		"no bound":            {Mode: "dry-run", RequestedBy: "t"},
		"a zero bound":        {Mode: "on", MaxShardLength: ptr[int64](0), RequestedBy: "t"},
		"an unknown mode":     {Mode: "auto", MaxShardLength: ptr[int64](100), RequestedBy: "t"},
		"min above max":       {Mode: "on", MaxShardLength: ptr[int64](100), MinShards: ptr(9), MaxShards: ptr(8), RequestedBy: "t"},
		"without requestedBy": {Mode: "on", MaxShardLength: ptr[int64](100)},
	} {
		if _, err := c.SetAutoscale(ctx, "orders", req); codeOf(err) != protocol.CodeInvalidRequest {
			t.Errorf("%s: %v, want INVALID_REQUEST", name, err)
		}
	}

	fill(t, rdb, "orders:0", 400)
	fill(t, rdb, "payments:1", 400)
	policy := func(mode string) protocol.AutoscaleRequest {
		return protocol.AutoscaleRequest{Mode: mode, MaxShardLength: ptr[int64](100), MaxShardMemoryBytes: ptr[int64](1 << 30),
			MinShards: ptr(2), MaxShards: ptr(8), CooldownSeconds: ptr[int64](1), RequestedBy: "t"}
	}
	if _, err := c.SetAutoscale(ctx, "payments", policy("dry-run")); err != nil {
		t.Fatal(err)
	}
	set, err := c.SetAutoscale(ctx, "orders", policy("on"))
	if err != nil || set.Policy.Mode != "on" || *set.Policy.MaxShardLength != 100 || set.Policy.LowWatermark != 0.5 || set.Policy.CooldownSeconds != 1 {
		t.Fatalf("set: %+v, %v", set, err)
	}

	// 400 on shard 0 is 4 times the bound: 2 shards become 8 (capped by
	// maxShards), and the migration completes by itself.
	var migs protocol.MigrationsResponse
	if !poll.Wait(10*time.Second, 20*time.Millisecond, func() bool {
		migs, err = c.Migrations(ctx, "orders", "orders")
		return err == nil && len(migs.Migrations) == 1 && migs.Migrations[0].State == protocol.MigrationDeprecated
	}) {
		t.Fatalf("orders' migrations: %+v, %v; want one DEPRECATED", migs, err)
	}
	if m := migs.Migrations[0]; m.FromShardCount != 2 || m.ToShardCount != 8 {
		t.Errorf("autoscaled %d→%d, want 2→8", m.FromShardCount, m.ToShardCount)
	}
	var view protocol.AutoscaleResponse
	if !poll.Wait(5*time.Second, 20*time.Millisecond, func() bool {
		view, err = c.Autoscale(ctx, "payments")
		return err == nil && view.LastDecision != nil && view.LastDecision.Action == protocol.AutoscaleScaleOut
	}) {
		t.Fatalf("payments: %+v, %v; want a scale-out decision", view, err)
	}
	if d := view.LastDecision; d.Taken || d.FromShards != 2 || d.ToShards != 8 {
		t.Errorf("dry run's decision %+v, want 2→8 not taken", d)
	}
	if migs, err := c.Migrations(ctx, "payments", "payments"); err != nil || len(migs.Migrations) != 0 {
		t.Errorf("the dry run started migrations: %+v, %v", migs, err)
	}
	page, err := c.Audit(ctx, "payments", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range page.Entries {
		if e.Operation == protocol.AuditAutoscale && strings.Contains(e.Reason, "would scale-out 2→8") && e.RequestedBy == actors.AutoscaleRequester {
			found = true
		}
	}
	if !found {
		t.Errorf("no AUTOSCALE audit entry naming the dry run's decision: %+v", page.Entries)
	}

	// Both policies, and the dry run's last decision, survive a restart.
	closeCoordinator(t, c)
	c = startAutoscaling(t, store, rdb)
	defer closeCoordinator(t, c)
	for prefix, mode := range map[string]string{"orders": "on", "payments": "dry-run"} {
		got, err := c.Autoscale(ctx, prefix)
		if err != nil || got.Policy.Mode != mode || got.Policy.RequestedBy != "t" {
			t.Errorf("%s after a restart: %+v, %v; want mode %s", prefix, got, err, mode)
		}
	}
	recs, err := store.LoadStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.StreamPrefix == "payments" && (r.Autoscale == nil || r.Autoscale.LastDecision == nil || r.Autoscale.LastDecision.To != 8) {
			t.Errorf("payments' record keeps no decision to scale: %+v", r.Autoscale)
		}
	}
}
