package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// clusterMemberLease is the member lease of the cluster-mode run: a member
// fails closed 6 s after its last OK answer, so every failover must be
// shorter than that, heartbeat interval included.
const clusterMemberLease = "6s"

// replica is one `rscoord serve --store etcd` process on a fixed port.
type replica struct {
	name, url string
	args      []string
	env       []string // the admin password and the shared token secret
	proc      *proctest.Process
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs the replica (again, after a kill) and waits until it serves
// as the owner or stands by.
func (r *replica) start(t *testing.T, bin string, run int) {
	t.Helper()
	r.proc = proctest.Start(t, fmt.Sprintf("%s-%d", r.name, run), bin, r.args, r.env...)
	if _, err := r.proc.WaitForLine(60*time.Second, func(l string) bool {
		return strings.Contains(l, `"rscoord listening"`) || strings.Contains(l, `"standing by"`)
	}); err != nil {
		t.Fatalf("%s: %v\n%s", r.name, err, r.proc.Output())
	}
}

// clusterOwner asks the replica at url which replica runs the group
// orders of the stream orders (each stream runs on the replica placement
// puts it on); "" while none answers or nobody owns it.
func clusterOwner(url string) string {
	cli := http.Client{Timeout: 2 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url+protocol.BasePath+"/monitoring/cluster", nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", coordtest.Basic("admin", e2eAdminPassword))
	resp, err := cli.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var view protocol.ClusterResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&view) != nil {
		return ""
	}
	for _, g := range view.Groups {
		if g.StreamPrefix == "orders" && g.ConsumerGroup == "orders" {
			return g.Owner
		}
	}
	return ""
}

// awaitNewOwner waits until a replica other than gone owns the coordinator,
// asking through every replica in ask.
func awaitNewOwner(t *testing.T, gone string, ask []*replica) string {
	t.Helper()
	owner := ""
	if !poll.Wait(30*time.Second, 50*time.Millisecond, func() bool {
		for _, r := range ask {
			if o := clusterOwner(r.url); o != "" && o != gone {
				owner = o
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no new owner after %s", gone)
	}
	return owner
}

// The cluster mode end to end: 3 replicas on a 3-member etcd, 3 consumer
// pods and a publisher given all three URLs, 20,000 records at 2,000/s
// over a Redis Cluster. The replica running the stream is SIGKILLed and
// restarted, then the replica running it by then is SIGKILLed: every record is handled, none outside its member's
// window, no two windows of a shard overlap, and no member fails closed
// (no ownership window closes) with a member lease of 6 s.
func TestClusterModeSurvivesOwnerKills(t *testing.T) {
	t.Parallel()
	const (
		shards  = 8
		records = 20000
	)
	ctx := context.Background()
	b := build(t)
	etcd := etcdtest.NewCluster(t)
	redis := redistest.NewCluster(t)
	dir := t.TempDir()

	users := usersFile(t)
	var replicas []*replica
	var urls []string
	for i := range 3 {
		r := &replica{name: fmt.Sprintf("r%d", i+1)}
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		r.url = "http://" + addr
		r.args = []string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, r.name), "--users", users, "--log-format", "json",
			"--member-lease", clusterMemberLease, "--heartbeat-interval", "1s", "--rebalance-timeout", "20s",
			"--store", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--advertise-url", r.url, "--replica-id", r.name}
		// Every replica of a cluster shares the token secret (in
		// adminEnv), so a token one issued is good on the others.
		r.env = adminEnv()
		r.start(t, b.coordinator, 0)
		replicas = append(replicas, r)
		urls = append(urls, r.url)
	}
	byName := map[string]*replica{}
	for _, r := range replicas {
		byName[r.name] = r
	}
	coordinators := strings.Join(urls, ",")
	s := remote(t, replicas[1].url) // a stand-by: forwarded
	s.CreateStream("orders", shards)
	if err := redistest.CreateShards(ctx, redis.Client(), "orders", shards, "orders"); err != nil {
		t.Fatal(err)
	}
	redisAddrs := strings.Join(redis.Addrs, ",")

	pods := make([]*pod, 3)
	for i := range pods {
		name := fmt.Sprintf("pod-%d", i)
		p := &pod{name: name, events: filepath.Join(dir, name+"-events.jsonl"), ownership: filepath.Join(dir, name+"-ownership.jsonl")}
		p.proc = proctest.Start(t, name, b.consumer, []string{
			"--coordinator", coordinators, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
			"--concurrency", "2", "--workers", "2", "--handler-delay", "1ms", "--member-lease", clusterMemberLease,
			"--claim-min-idle", claimMinIdle, "--events-log", p.events, "--ownership-log", p.ownership,
		}, append(memberEnv(), "POD_NAME="+name)...)
		pods[i] = p
	}
	// Settled: every pod reads a shard and no window opened or closed for 2 s.
	var settled int64
	if !poll.Wait(60*time.Second, 200*time.Millisecond, func() bool {
		var last int64
		all := true
		for _, p := range pods {
			evs := readJSONLines[ownershipEvent](t, p.ownership)
			started := false
			for _, e := range evs {
				started = started || e.Event == "start"
				last = max(last, e.AtNanos)
			}
			all = all && started
		}
		if all && time.Since(time.Unix(0, last)) > 2*time.Second {
			settled = time.Now().UnixNano()
		}
		return settled != 0
	}) {
		t.Fatal("the pods did not settle on the shards within 60 s")
	}

	published := filepath.Join(dir, "published.jsonl")
	pub := proctest.Start(t, "publisher", b.publisher, []string{
		"--coordinator", coordinators, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", fmt.Sprint(records), "--rate", "2000", "--batch", "50", "--published-log", published,
	}, memberEnv()...)

	// The owner dies mid-run (a tenth of the records published), comes
	// back as a stand-by; then, with another tenth published, the new
	// owner dies.
	awaitLines(t, published, records/10, 60*time.Second)
	owner := awaitNewOwner(t, "", replicas)
	var killed []string
	kill := func(name string) {
		t.Helper()
		r := byName[name]
		if err := r.proc.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = r.proc.Wait(10 * time.Second)
		var rest []*replica
		for _, o := range replicas {
			if o != r {
				rest = append(rest, o)
			}
		}
		start := time.Now()
		next := awaitNewOwner(t, name, rest)
		t.Logf("owner %s SIGKILLed; %s owns after %v", name, next, time.Since(start))
		owner = next
		killed = append(killed, name)
	}
	kill(owner)
	for _, r := range replicas {
		if r.proc.Exited() {
			r.start(t, b.coordinator, 1)
		}
	}
	awaitLines(t, published, lineCount(t, published)+records/10, 60*time.Second)
	// Placement may have moved the stream back to the restarted replica:
	// kill whoever runs it now.
	kill(awaitNewOwner(t, "", replicas))

	if err := pub.Wait(2 * time.Minute); err != nil {
		t.Fatalf("publisher: %v", err)
	}
	want := publishedIDs(t, published, records)
	if missing := unhandled(t, pods, want, 90*time.Second); len(missing) > 0 {
		t.Errorf("%d of %d published records were never handled, e.g. %v", len(missing), records, missing[:min(5, len(missing))])
	}

	// No member failed closed: no window closed, and no pod stopped, from
	// the settled assignment until now.
	end := time.Now().UnixNano()
	for _, p := range pods {
		if p.proc.Exited() {
			t.Errorf("%s exited during the run:\n%s", p.name, p.proc.Output())
		}
		for _, e := range readJSONLines[ownershipEvent](t, p.ownership) {
			if e.Event == "stop" && e.AtNanos > settled && e.AtNanos < end {
				t.Errorf("%s: window of shard %d closed at %v, %v after the assignment settled; its warnings and ownership lines:\n%s",
					p.name, e.Shard, time.Unix(0, e.AtNanos).Format(time.RFC3339Nano), time.Duration(e.AtNanos-settled), why(p.proc.Output()))
			}
		}
	}
	stopPods(t, pods)
	byShard, handled := checkPodLogs(t, pods)
	if len(byShard) != shards {
		t.Errorf("ownership logs cover %d shards, want %d", len(byShard), shards)
	}
	t.Logf("%d handlings of %d records; owners SIGKILLed: %v", len(handled), records, killed)
	for _, r := range replicas {
		if r.proc.Exited() {
			continue
		}
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := r.proc.Wait(30 * time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v\n%s", r.name, err, r.proc.Output())
		}
	}
}

// why keeps the lines of a pod's log that can say why a window closed: its
// warnings, errors and ownership changes (the last 40 of them).
func why(log string) string {
	var keep []string
	for _, line := range strings.Split(log, "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "warn") || strings.Contains(l, "error") || strings.Contains(l, "revok") ||
			strings.Contains(l, "fenc") || strings.Contains(l, "lease") || strings.Contains(l, "assign") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep[max(0, len(keep)-40):], "\n")
}
