package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// TestAutoscaleGrowsAStreamUnderTraffic: a 2-shard stream with an
// autoscaling policy in mode on takes 30,000 records at 1,500/s, more than
// its two consumer pods handle on 2 shards (each shard is read by one
// member at a time), so its shards' length passes the bound and it scales
// out by itself to 4 or more. Every migration completes, every record is
// handled, none by two members at once; a second stream in dry-run past
// its bound keeps its count and has an audit entry naming what it would
// have done.
func TestAutoscaleGrowsAStreamUnderTraffic(t *testing.T) {
	t.Parallel()
	const records = 30000
	ctx := context.Background()
	b := build(t)
	cluster := redistest.NewCluster(t)
	rdb := cluster.Client()
	dir := t.TempDir()
	redisAddrs := strings.Join(cluster.Addrs, ",")
	coord, url := startCoordinator(t, b.coordinator, filepath.Join(dir, "coord"), "--redis", redisAddrs,
		"--producer-routing-lease", "1s", "--drain-check-interval", "200ms", "--autoscale-interval", "250ms", "--max-shards", "16")
	s := remote(t, url)
	s.CreateStream("orders", 2)
	s.CreateStream("payments", 2)
	autoscalePath := func(prefix string) string { return base + "/streams/" + prefix + "/autoscale" }
	var view protocol.AutoscaleResponse
	s.JSON(http.MethodGet, autoscalePath("orders"), nil, http.StatusOK, &view)
	if view.Policy.Mode != protocol.AutoscaleOff || view.LastDecision != nil {
		t.Fatalf("a policy never set: %+v", view)
	}
	s.JSON(http.MethodPut, autoscalePath("orders"), map[string]any{"mode": "on", "maxShardLength": 3000, "minShards": 2,
		"maxShards": 8, "cooldownSeconds": 5, "requestedBy": "e2e"}, http.StatusOK, &view)
	if view.Policy.Mode != protocol.AutoscaleOn || view.Policy.MaxShards != 8 {
		t.Fatalf("policy set: %+v", view)
	}
	if status, raw := s.Do(http.MethodPut, autoscalePath("orders"), map[string]any{"mode": "on", "maxShardLength": 3000,
		"maxShards": 32, "requestedBy": "e2e"}); status != http.StatusBadRequest || !strings.Contains(string(raw), "--max-shards 16") {
		t.Errorf("maxShards past --max-shards: %d %s, want 400 naming the limit", status, raw)
	}
	// The dry run's stream is past its bound before its policy is set.
	pipe := rdb.Pipeline()
	for i := range 1000 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: protocol.StreamKey("payments", 0), NoMkStream: true, Values: []any{"i", i}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	s.JSON(http.MethodPut, autoscalePath("payments"), map[string]any{"mode": "dry-run", "maxShardLength": 500,
		"cooldownSeconds": 600, "requestedBy": "e2e"}, http.StatusOK, nil)

	started := time.Now()
	pods := startPods(t, b.consumer, url, redisAddrs, dir, 2, "3ms")
	published := filepath.Join(dir, "published.jsonl")
	pub := proctest.Start(t, "publisher", b.publisher, []string{
		"--coordinator", url, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", fmt.Sprint(records), "--rate", "1500", "--batch", "20", "--published-log", published,
		"--refresh-interval", "500ms",
	}, memberEnv()...)
	if err := pub.Wait(2 * time.Minute); err != nil {
		t.Fatalf("publisher: %v", err)
	}
	t.Logf("published in %v", time.Since(started).Round(time.Millisecond))
	want := publishedIDs(t, published, records)
	if missing := unhandled(t, pods, want, 60*time.Second); len(missing) > 0 {
		t.Errorf("%d of %d records were never handled, e.g. %v", len(missing), records, missing[:min(5, len(missing))])
	}
	t.Logf("handled in %v", time.Since(started).Round(time.Millisecond))
	// Stop deciding, so that no scale-in starts while the run is checked,
	// and let a migration under way finish.
	s.JSON(http.MethodPut, autoscalePath("orders"), map[string]any{"mode": "off", "requestedBy": "e2e"}, http.StatusOK, nil)
	var migs protocol.MigrationsResponse
	migrationsPath := base + "/monitoring/streams/orders/groups/orders/migrations"
	if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		s.JSON(http.MethodGet, migrationsPath, nil, http.StatusOK, &migs)
		return migs.ActiveReshardingID == nil
	}) {
		t.Fatalf("migration %s still active: %+v", *migs.ActiveReshardingID, migs.Migrations)
	}
	most := 2
	for _, m := range migs.Migrations {
		if m.State != protocol.MigrationDeprecated {
			t.Errorf("migration %s %d→%d ended %s, want DEPRECATED (%s)", m.ReshardingID, m.FromShardCount, m.ToShardCount, m.State, m.Detail)
		}
		most = max(most, m.ToShardCount)
		t.Logf("migration %s %d→%d %s, %v after the pods started", m.ReshardingID, m.FromShardCount, m.ToShardCount, m.State,
			m.CreatedAt.Sub(started).Round(time.Millisecond))
	}
	if most < 4 {
		t.Errorf("the stream grew to %d shards at most, want at least 4", most)
	}
	if missing := unhandled(t, pods, want, 30*time.Second); len(missing) > 0 {
		t.Errorf("%d of %d records stranded after the migrations, e.g. %v", len(missing), records, missing[:min(5, len(missing))])
	}

	// The dry run reported and scaled nothing.
	s.JSON(http.MethodGet, autoscalePath("payments"), nil, http.StatusOK, &view)
	if d := view.LastDecision; d == nil || d.Action != protocol.AutoscaleScaleOut || d.Taken {
		t.Errorf("dry run's last decision %+v, want a scale-out not taken", d)
	}
	var routing protocol.ProducerRoutingResponse
	s.JSON(http.MethodGet, base+"/streams/payments/groups/payments/producer-routing", nil, http.StatusOK, &routing)
	if routing.ShardCount != 2 {
		t.Errorf("the dry run's stream has %d shards, want 2", routing.ShardCount)
	}
	var page protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?streamPrefix=payments", nil, http.StatusOK, &page)
	reported := false
	for _, e := range page.Entries {
		reported = reported || e.Operation == protocol.AuditAutoscale && strings.Contains(e.Reason, "would scale-out 2→")
	}
	if !reported {
		t.Errorf("no AUTOSCALE audit entry names the dry run's decision: %+v", page.Entries)
	}

	stopPods(t, pods)
	checkPodLogs(t, pods)
	t.Logf("run took %v", time.Since(started).Round(time.Millisecond))
	if err := coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := coord.Wait(30 * time.Second); err != nil {
		t.Fatalf("coordinator after SIGTERM: %v", err)
	}
}
