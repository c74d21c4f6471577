package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// TestScaleOutUnderTraffic scales 4→8 while a publisher publishes
// continuously to 3 consumer pods: every record is handled at least once,
// no shard is read by two members at overlapping times, and the publisher
// writes to the added shards within one refresh interval of the scale.
func TestScaleOutUnderTraffic(t *testing.T) {
	t.Parallel()
	const (
		records = 8000
		refresh = 500 * time.Millisecond
	)
	b := build(t)
	cluster := redistest.NewCluster(t)
	dir := t.TempDir()
	redisAddrs := strings.Join(cluster.Addrs, ",")
	coord, url := startCoordinator(t, b.coordinator, filepath.Join(dir, "coord"), "--redis", redisAddrs,
		"--producer-routing-lease", "1s", "--drain-check-interval", "200ms")
	s := remote(t, url)
	s.CreateStream("orders", 4) // the coordinator provisions the shard streams

	pods := startPods(t, b.consumer, url, redisAddrs, dir, 3, "1ms")
	published := filepath.Join(dir, "published.jsonl")
	pub := proctest.Start(t, "publisher", b.publisher, []string{
		"--coordinator", url, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", fmt.Sprint(records), "--rate", "2000", "--batch", "20", "--published-log", published,
		"--refresh-interval", refresh.String(),
	}, memberEnv()...)
	// Scale out mid-run, a fifth of the records published.
	awaitLines(t, published, records/5, 60*time.Second)
	mig := scaleTo(t, s, "orders", 8)
	activated := time.Now() // the answer comes once the migration is ACTIVE
	if err := pub.Wait(2 * time.Minute); err != nil {
		t.Fatalf("publisher: %v", err)
	}
	awaitMigration(t, s, "orders", "orders", mig.ReshardingID, protocol.MigrationDeprecated, reshardLimit)

	type publishedRecord struct {
		EventID   string `json:"eventId"`
		StreamKey string `json:"streamKey"`
		RecordID  string `json:"recordId"`
	}
	want := map[string]bool{}
	onNew := 0
	var firstOnNew int64 // ms of the first record id on an added shard
	for _, r := range readJSONLines[publishedRecord](t, published) {
		want[r.EventID] = true
		if r.StreamKey >= "orders:4" && r.StreamKey <= "orders:7" {
			onNew++
			ms, _, _ := strings.Cut(r.RecordID, "-")
			if v, err := strconv.ParseInt(ms, 10, 64); err == nil && (firstOnNew == 0 || v < firstOnNew) {
				firstOnNew = v
			}
		}
	}
	if len(want) != records {
		t.Fatalf("publisher logged %d distinct records, want %d", len(want), records)
	}
	if onNew == 0 {
		t.Fatalf("no record reached the added shards (activated at %v)", activated)
	}
	// Record ids carry Redis's clock in ms (same machine): the producer saw
	// the new count within one refresh interval, give or take a publish.
	if delay := time.Duration(firstOnNew-activated.UnixMilli()) * time.Millisecond; delay > refresh+time.Second {
		t.Errorf("first record on an added shard %v after activation; the refresh interval is %v", delay, refresh)
	} else {
		t.Logf("first record on an added shard %v after activation (refresh interval %v)", delay, refresh)
	}
	type handled struct {
		EventID string `json:"eventId"`
	}
	var missing int
	poll.Wait(60*time.Second, 250*time.Millisecond, func() bool {
		seen := map[string]bool{}
		for _, p := range pods {
			for _, h := range readJSONLines[handled](t, p.events) {
				seen[h.EventID] = true
			}
		}
		missing = 0
		for id := range want {
			if !seen[id] {
				missing++
			}
		}
		return missing == 0
	})
	if missing > 0 {
		t.Errorf("%d of %d records never handled", missing, records)
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
	byShard, _ := checkPodLogs(t, pods)
	if len(byShard) != 8 {
		t.Errorf("ownership logs cover %d shards, want 8", len(byShard))
	}
	if err := coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := coord.Wait(30 * time.Second); err != nil {
		t.Fatalf("coordinator after SIGTERM: %v", err)
	}
}
