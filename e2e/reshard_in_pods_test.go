package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// TestScaleInUnderTraffic scales 8→2 while a publisher publishes to 3
// consumer pods, with --retire-removed-shards: every record is handled, no
// shard is read by two members at once, the removed keys are gone once the
// migration is DEPRECATED, and a producer still holding the 8-shard routing
// hits NOMKSTREAM, refreshes and lands in a live shard.
func TestScaleInUnderTraffic(t *testing.T) {
	t.Parallel()
	const records = 6000
	ctx := context.Background()
	b := build(t)
	cluster := redistest.NewCluster(t)
	rdb := cluster.Client()
	dir := t.TempDir()
	redisAddrs := strings.Join(cluster.Addrs, ",")
	coord, url := startCoordinator(t, b.coordinator, filepath.Join(dir, "coord"), "--redis", redisAddrs,
		"--producer-routing-lease", "1s", "--drain-check-interval", "200ms", "--retire-removed-shards")
	s := remote(t, url)
	s.CreateStream("orders", 8)

	// A producer that will not refresh on its own before the test ends,
	// with a lease of its own far longer than the coordinator's: the
	// coordinator's (1s, told in every routing answer) bounds it, so its
	// routing is refreshed before it publishes again.
	stale, err := producer.New(producer.WithCoordinator(url), producer.WithStream("orders"), producer.WithRedis(rdb),
		producer.WithRefreshInterval(10*time.Minute), producer.WithRoutingLease(20*time.Minute),
		producer.WithBasicAuth(e2eMemberUser, e2eMemberPassword))
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stale.Close()

	pods := startPods(t, b.consumer, url, redisAddrs, dir, 3, "1ms")
	published := filepath.Join(dir, "published.jsonl")
	pub := proctest.Start(t, "publisher", b.publisher, []string{
		"--coordinator", url, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", fmt.Sprint(records), "--rate", "2000", "--batch", "20", "--published-log", published,
		"--refresh-interval", "500ms",
	}, memberEnv()...)
	// Scale in mid-run: a quarter of the records published, some of them
	// to the shards the scale removes.
	awaitLines(t, published, records/4, 60*time.Second)
	mig := scaleTo(t, s, "orders", 2)
	if err := pub.Wait(2 * time.Minute); err != nil {
		t.Fatalf("publisher: %v", err)
	}
	awaitMigration(t, s, "orders", "orders", mig.ReshardingID, protocol.MigrationDeprecated, 60*time.Second)
	for i := 2; i < 8; i++ {
		if key := protocol.StreamKey("orders", i); keyExists(t, rdb, key) {
			t.Errorf("%s still exists after the migration was DEPRECATED with --retire-removed-shards", key)
		}
	}

	type publishedRecord struct {
		EventID   string `json:"eventId"`
		StreamKey string `json:"streamKey"`
	}
	type handled struct {
		EventID string `json:"eventId"`
	}
	handledNow := func() map[string]bool {
		seen := map[string]bool{}
		for _, p := range pods {
			for _, h := range readJSONLines[handled](t, p.events) {
				seen[h.EventID] = true
			}
		}
		return seen
	}
	// Nothing may be stranded: a removed shard is retired only once
	// drained, so every record published to one was handled before the
	// migration became DEPRECATED.
	seen := handledNow()
	want := map[string]bool{}
	onRemoved, strandedOnRemoved := 0, 0
	for _, r := range readJSONLines[publishedRecord](t, published) {
		want[r.EventID] = true
		if r.StreamKey != "orders:0" && r.StreamKey != "orders:1" {
			onRemoved++
			if !seen[r.EventID] {
				strandedOnRemoved++
			}
		}
	}
	if len(want) != records {
		t.Fatalf("publisher logged %d distinct records, want %d", len(want), records)
	}
	if onRemoved == 0 {
		t.Fatal("no record was published to a removed shard: the scale-in came too early to prove anything")
	}
	if strandedOnRemoved > 0 {
		t.Errorf("%d of %d records published to removed shards were not handled when the migration was DEPRECATED",
			strandedOnRemoved, onRemoved)
	}
	// Records on the live shards are handled at the consumers' pace.
	missing := 0
	poll.Wait(60*time.Second, 250*time.Millisecond, func() bool {
		seen, missing = handledNow(), 0
		for id := range want {
			if !seen[id] {
				missing++
			}
		}
		return missing == 0
	})
	if missing > 0 {
		t.Errorf("%d of %d records were never handled", missing, records)
	}

	// Keys the stale routing sent to removed shards reach live ones: the
	// routing, older than the coordinator's lease, is refreshed first.
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("late-%d", i)
		if protocol.Route(k, 8) >= 2 {
			key = k
		}
	}
	streamKey, id, err := stale.Publish(ctx, key, []any{"eventId", "late"})
	if err != nil {
		t.Fatalf("stale producer: %v", err)
	}
	if want := protocol.StreamKey("orders", protocol.Route(key, 2)); streamKey != want || id == "" {
		t.Fatalf("stale producer published to %s (id %q), want the live shard %s", streamKey, id, want)
	}
	if r, ok := stale.Routing(); !ok || r.ShardCount != 2 {
		t.Fatalf("stale producer did not refresh to 2 shards: %+v", r)
	}

	for _, p := range pods {
		if err := p.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.proc.Wait(30 * time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v", p.name, err)
		}
		p.end = time.Now().UnixNano()
	}
	checkPodLogs(t, pods)
	if err := coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := coord.Wait(30 * time.Second); err != nil {
		t.Fatalf("coordinator after SIGTERM: %v", err)
	}
}
