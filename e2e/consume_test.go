package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// Timing of the run: short leases so that a killed pod's shards move in
// seconds, not the production 15 s.
const (
	memberLease       = "3s"
	heartbeatInterval = "500ms"
	claimMinIdle      = "2s"
)

// startCoordinator runs the coordinator binary on data dir dir (with extra
// flags, if any), authentication on with the MEMBER user of usersFile, and
// returns its base URL.
func startCoordinator(t *testing.T, bin, dir string, extra ...string) (*proctest.Process, string) {
	t.Helper()
	p := proctest.Start(t, "coordinator", bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--users", usersFile(t), "--log-format", "json", "--member-lease", memberLease, "--heartbeat-interval", heartbeatInterval,
		"--rebalance-timeout", "20s"}, extra...), adminEnv()...)
	line, err := p.WaitForLine(30*time.Second, func(l string) bool { return strings.Contains(l, `"rscoord listening"`) })
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Address == "" {
		t.Fatalf("no address in %q: %v", line, err)
	}
	return p, "http://" + rec.Address
}

// startPods runs n consumer pods pod-0 … pod-{n-1} of orders/orders, each
// logging its events and ownership under dir, with handlerDelay per record.
func startPods(t *testing.T, bin, url, redisAddrs, dir string, n int, handlerDelay string) []*pod {
	t.Helper()
	pods := make([]*pod, n)
	for i := range pods {
		name := fmt.Sprintf("pod-%d", i)
		p := &pod{name: name, events: filepath.Join(dir, name+"-events.jsonl"), ownership: filepath.Join(dir, name+"-ownership.jsonl")}
		p.proc = proctest.Start(t, name, bin, []string{
			"--coordinator", url, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
			"--concurrency", "2", "--workers", "2", "--handler-delay", handlerDelay, "--member-lease", memberLease,
			"--claim-min-idle", claimMinIdle, "--events-log", p.events, "--ownership-log", p.ownership,
		}, append(memberEnv(), "POD_NAME="+name)...)
		pods[i] = p
	}
	return pods
}

type pod struct {
	name      string
	proc      *proctest.Process
	events    string
	ownership string
	// end is when the pod stopped reading for sure: its kill time, or
	// the end of the run.
	end int64
}

// TestConsumersSurviveKillAndStop publishes 12,000 records over a
// 3-master cluster to 3 consumer pods; one pod is SIGKILLed mid-run and
// one is stopped gracefully. Every published record must be handled at
// least once, and no shard may be read by two members at overlapping times.
func TestConsumersSurviveKillAndStop(t *testing.T) {
	t.Parallel()
	const (
		shards  = 8
		records = 12000
	)
	ctx := context.Background()
	b := build(t)
	cluster := redistest.NewCluster(t)
	dir := t.TempDir()
	coord, url := startCoordinator(t, b.coordinator, filepath.Join(dir, "coord"))
	s := remote(t, url)
	s.CreateStream("orders", shards)
	if err := redistest.CreateShards(ctx, cluster.Client(), "orders", shards, "orders"); err != nil {
		t.Fatal(err)
	}
	redisAddrs := strings.Join(cluster.Addrs, ",")

	pods := startPods(t, b.consumer, url, redisAddrs, dir, 3, "2ms")
	published := filepath.Join(dir, "published.jsonl")
	pub := proctest.Start(t, "publisher", b.publisher, []string{
		"--coordinator", url, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", fmt.Sprint(records), "--rate", "2500", "--batch", "50", "--published-log", published,
	}, memberEnv()...)

	// Mid-run faults, once the pods are at work: kill pod-0 outright,
	// then, once the others handled more since, stop pod-1 gracefully
	// (while pod-0's shards wait for its lease to run out).
	awaitLines(t, published, records/5, 60*time.Second)
	awaitLines(t, pods[0].events, 100, 30*time.Second)
	if err := pods[0].proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pods[0].end = time.Now().UnixNano()
	pods[0].proc.Wait(10 * time.Second)
	awaitLines(t, published, records*2/5, 60*time.Second)
	awaitLines(t, pods[1].events, lineCount(t, pods[1].events)+100, 30*time.Second)
	if err := pods[1].proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := pods[1].proc.Wait(30 * time.Second); err != nil {
		t.Fatalf("pod-1 after SIGTERM: %v", err)
	}
	pods[1].end = time.Now().UnixNano()

	if err := pub.Wait(2 * time.Minute); err != nil {
		t.Fatalf("publisher: %v", err)
	}
	want := publishedIDs(t, published, records)

	// Wait until every record was handled by someone.
	type handled struct {
		MemberID string `json:"memberId"`
		EventID  string `json:"eventId"`
	}
	var missing []string
	perPod := map[string]int{}
	total := 0
	poll.Wait(90*time.Second, 250*time.Millisecond, func() bool {
		seen := map[string]bool{}
		total = 0
		for _, p := range pods {
			hs := readJSONLines[handled](t, p.events)
			perPod[p.name] = len(hs)
			total += len(hs)
			for _, h := range hs {
				seen[h.EventID] = true
			}
		}
		missing = missing[:0]
		for id := range want {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	})
	if len(missing) > 0 {
		t.Errorf("%d of %d published records were never handled, e.g. %v", len(missing), records, missing[:min(5, len(missing))])
	}
	t.Logf("handled per pod %v; %d handlings of %d records (%d redeliveries)", perPod, total, records, total-records+len(missing))
	// The faults must have hit pods that were working, or the run proves nothing.
	if perPod["pod-0"] == 0 || perPod["pod-1"] == 0 {
		t.Errorf("a faulted pod handled nothing before its fault: %v", perPod)
	}

	if err := pods[2].proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := pods[2].proc.Wait(30 * time.Second); err != nil {
		t.Fatalf("pod-2 after SIGTERM: %v", err)
	}
	pods[2].end = time.Now().UnixNano()

	byShard, _ := checkPodLogs(t, pods)
	if len(byShard) != shards {
		t.Errorf("ownership logs cover %d shards, want %d", len(byShard), shards)
	}

	var g protocol.GroupResponse
	s.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &g)
	t.Logf("group at the end: state %s, epoch %d, target %v", g.State, g.GroupEpoch, g.TargetAssignmentSummary)
	if err := coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := coord.Wait(30 * time.Second); err != nil {
		t.Fatalf("coordinator after SIGTERM: %v", err)
	}
}
