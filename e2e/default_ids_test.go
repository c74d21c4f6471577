package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/proctest"
)

// TestThreeDefaultPodsOnOneHost starts three consumer pods on one host
// with nothing but the required flags and no POD_NAME: each process must
// take its own member id (host name plus process id), so every record is
// handled inside its own member's window and no shard is read by two
// members at once.
func TestThreeDefaultPodsOnOneHost(t *testing.T) {
	t.Parallel()
	const (
		shards  = 8
		records = 3000
	)
	ctx := context.Background()
	b := build(t)
	begin := time.Now()
	cluster := redistest.NewCluster(t)
	dir := t.TempDir()
	coord, url := startCoordinator(t, b.coordinator, filepath.Join(dir, "coord"))
	s := remote(t, url)
	s.CreateStream("orders", shards)
	if err := redistest.CreateShards(ctx, cluster.Client(), "orders", shards, "orders"); err != nil {
		t.Fatal(err)
	}
	redisAddrs := strings.Join(cluster.Addrs, ",")

	pods := make([]*pod, 3)
	for i := range pods {
		name := fmt.Sprintf("default-%d", i)
		p := &pod{name: name, events: filepath.Join(dir, name+"-events.jsonl"), ownership: filepath.Join(dir, name+"-ownership.jsonl")}
		// POD_NAME is cleared in case the test's own environment sets it.
		p.proc = proctest.Start(t, name, b.consumer, []string{
			"--coordinator", url, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
			"--events-log", p.events, "--ownership-log", p.ownership,
		}, append(memberEnv(), "POD_NAME=")...)
		pods[i] = p
	}
	t.Logf("pods started at +%v", time.Since(begin).Round(time.Millisecond))
	published := filepath.Join(dir, "published.jsonl")
	pub := proctest.Start(t, "publisher", b.publisher, []string{
		"--coordinator", url, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", fmt.Sprint(records), "--rate", "1500", "--batch", "50", "--published-log", published,
	}, memberEnv()...)
	if err := pub.Wait(time.Minute); err != nil {
		t.Fatalf("publisher: %v", err)
	}
	want := publishedIDs(t, published, records)

	if missing := unhandled(t, pods, want, 20*time.Second); len(missing) > 0 {
		t.Errorf("%d of %d published records were never handled", len(missing), records)
	}
	t.Logf("all handled at +%v", time.Since(begin).Round(time.Millisecond))

	// Stop all three at once: the run ends sooner, and each leave's
	// hand-off happens while the others still run.
	stopPods(t, pods)
	byShard, handled := checkPodLogs(t, pods)
	if len(byShard) != shards {
		t.Errorf("ownership logs cover %d shards, want %d", len(byShard), shards)
	}
	// Each process must have read under ids of its own.
	owner := map[string]string{} // member id → pod
	for _, p := range pods {
		n := 0
		for _, e := range readJSONLines[ownershipEvent](t, p.ownership) {
			if o, ok := owner[e.MemberID]; ok && o != p.name {
				t.Errorf("member id %s used by both %s and %s", e.MemberID, o, p.name)
			}
			owner[e.MemberID] = p.name
			n++
		}
		if n == 0 {
			t.Errorf("%s never owned a shard", p.name)
		}
	}
	t.Logf("%d handlings of %d records; member ids %v; run took %v after the build",
		len(handled), records, owner, time.Since(begin).Round(time.Millisecond))

	if err := coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := coord.Wait(30 * time.Second); err != nil {
		t.Fatalf("coordinator after SIGTERM: %v", err)
	}
}
