package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/proctest"
)

// maxConsumptionPause is the longest a shard may go without a record
// handled while records are published to it, faults included: a member
// that keeps its lease across a failover keeps reading.
const maxConsumptionPause = 4 * time.Second

// clusterFaultRun is a cluster-mode run under publishing traffic: 3
// replicas on a 3-member etcd, each replica's etcd traffic through proxies
// of its own (so that one replica can be cut off from etcd while the
// members still reach it), 3 consumer pods and a publisher given every
// replica's URL.
type clusterFaultRun struct {
	t        *testing.T
	replicas []*replica
	byName   map[string]*replica
	// etcdProxies are the proxies of each replica's etcd endpoints, by
	// replica name.
	etcdProxies map[string][]*etcdtest.Proxy
	pods        []*pod
	// settled is when the assignment settled (ns): no ownership window
	// may close after it.
	settled   int64
	published string
	pub       *proctest.Process
}

// waitUntil checks cond every 100 ms until it holds; t fails after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

// startClusterFaultRun starts the cluster and the pods on a stream of
// shards shards, waits until the assignment settled, and starts publishing
// rate records a second until check stops the publisher; it returns once
// publishing is under way.
func startClusterFaultRun(t *testing.T, shards, rate int) *clusterFaultRun {
	t.Helper()
	ctx := context.Background()
	b := build(t)
	etcd := etcdtest.NewCluster(t)
	redis := redistest.NewCluster(t)
	dir := t.TempDir()
	r := &clusterFaultRun{t: t, byName: map[string]*replica{}, etcdProxies: map[string][]*etcdtest.Proxy{}}

	users := usersFile(t)
	var urls []string
	for i := range 3 {
		rep := &replica{name: fmt.Sprintf("r%d", i+1)}
		var endpoints []string
		for _, ep := range etcd.Endpoints() {
			p := etcdtest.NewProxy(t, strings.TrimPrefix(ep, "http://"))
			r.etcdProxies[rep.name] = append(r.etcdProxies[rep.name], p)
			endpoints = append(endpoints, p.URL)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		rep.url = "http://" + addr
		rep.args = []string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, rep.name), "--users", users, "--log-format", "json",
			"--member-lease", clusterMemberLease, "--heartbeat-interval", "1s", "--rebalance-timeout", "20s",
			"--store", "etcd", "--etcd-endpoints", strings.Join(endpoints, ","), "--advertise-url", rep.url, "--replica-id", rep.name}
		rep.env = adminEnv()
		rep.start(t, b.coordinator, 0)
		r.replicas = append(r.replicas, rep)
		r.byName[rep.name] = rep
		urls = append(urls, rep.url)
	}
	coordinators := strings.Join(urls, ",")
	remote(t, r.replicas[1].url).CreateStream("orders", shards)
	if err := redistest.CreateShards(ctx, redis.Client(), "orders", shards, "orders"); err != nil {
		t.Fatal(err)
	}
	redisAddrs := strings.Join(redis.Addrs, ",")

	for i := range 3 {
		name := fmt.Sprintf("pod-%d", i)
		p := &pod{name: name, events: filepath.Join(dir, name+"-events.jsonl"), ownership: filepath.Join(dir, name+"-ownership.jsonl")}
		p.proc = proctest.Start(t, name, b.consumer, []string{
			"--coordinator", coordinators, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
			"--concurrency", "2", "--workers", "2", "--handler-delay", "1ms", "--member-lease", clusterMemberLease,
			"--claim-min-idle", claimMinIdle, "--events-log", p.events, "--ownership-log", p.ownership,
		}, append(memberEnv(), "POD_NAME="+name)...)
		r.pods = append(r.pods, p)
	}
	// Settled: every pod reads a shard and no window opened or closed for 2 s.
	waitUntil(t, 60*time.Second, "the pods settle on the shards", func() bool {
		var last int64
		for _, p := range r.pods {
			started := false
			for _, e := range readJSONLines[ownershipEvent](t, p.ownership) {
				started = started || e.Event == "start"
				last = max(last, e.AtNanos)
			}
			if !started {
				return false
			}
		}
		return time.Since(time.Unix(0, last)) > 2*time.Second
	})
	r.settled = time.Now().UnixNano()

	r.published = filepath.Join(dir, "published.jsonl")
	r.pub = proctest.Start(t, "publisher", b.publisher, []string{
		"--coordinator", coordinators, "--redis", redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", "100000000", "--rate", fmt.Sprint(rate), "--batch", "50", "--published-log", r.published,
	}, memberEnv()...)
	waitUntil(t, 30*time.Second, "two seconds of records published", func() bool {
		return len(readJSONLines[struct{}](t, r.published)) >= 2*rate
	})
	return r
}

// owner is the replica that runs the stream now, asked through every
// replica that answers.
func (r *clusterFaultRun) owner() *replica {
	r.t.Helper()
	var name string
	waitUntil(r.t, 30*time.Second, "a replica names the stream's owner", func() bool {
		for _, rep := range r.replicas {
			if o := clusterOwner(rep.url); o != "" {
				name = o
				return true
			}
		}
		return false
	})
	return r.byName[name]
}

// awaitOtherOwner waits until a replica other than gone runs the stream,
// and returns how long that took from since.
func (r *clusterFaultRun) awaitOtherOwner(gone *replica, since time.Time) (string, time.Duration) {
	r.t.Helper()
	var name string
	waitUntil(r.t, 30*time.Second, "another replica takes the stream over from "+gone.name, func() bool {
		for _, rep := range r.replicas {
			if rep == gone {
				continue
			}
			if o := clusterOwner(rep.url); o != "" && o != gone.name {
				name = o
				return true
			}
		}
		return false
	})
	return name, time.Since(since)
}

// hold waits until d has passed since from, failing fast when a pod exits
// meanwhile: the length of a fault, not a synchronisation.
func (r *clusterFaultRun) hold(from time.Time, d time.Duration) {
	r.t.Helper()
	waitUntil(r.t, d+5*time.Second, "the fault's length", func() bool {
		for _, p := range r.pods {
			if p.proc.Exited() {
				r.t.Fatalf("%s exited during the fault:\n%s", p.name, p.proc.Output())
			}
		}
		return time.Since(from) >= d
	})
}

// check stops the publisher, waits for every record, then checks the run:
// every record handled, no pod exited, no ownership window closed after
// the assignment settled, no overlapping windows, no record handled
// outside its member's window, and no shard paused longer than
// maxConsumptionPause while records were published. It returns the
// longest pause and its shard.
func (r *clusterFaultRun) check() (time.Duration, int) {
	t := r.t
	t.Helper()
	if err := r.pub.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r.pub.Wait(time.Minute); err != nil {
		t.Fatalf("publisher after SIGTERM: %v", err)
	}
	want := loggedIDs(t, r.published)
	if missing := unhandled(t, r.pods, want, 90*time.Second); len(missing) > 0 {
		t.Errorf("%d of %d published records were never handled, e.g. %v", len(missing), len(want), missing[:min(5, len(missing))])
	}
	end := time.Now().UnixNano()
	closed := 0
	for _, p := range r.pods {
		if p.proc.Exited() {
			t.Errorf("%s exited during the run:\n%s", p.name, p.proc.Output())
		}
		for _, e := range readJSONLines[ownershipEvent](t, p.ownership) {
			if e.Event == "stop" && e.AtNanos > r.settled && e.AtNanos < end {
				closed++
				if closed <= 12 {
					t.Errorf("%s: window of shard %d closed at %v, %v after the assignment settled; its warnings and ownership lines:\n%s",
						p.name, e.Shard, time.Unix(0, e.AtNanos).Format(time.RFC3339Nano), time.Duration(e.AtNanos-r.settled), why(p.proc.Output()))
				}
			}
		}
	}
	if closed > 0 {
		t.Errorf("%d ownership windows closed after the assignment settled, want 0", closed)
	}
	stopPods(t, r.pods)
	_, handled := checkPodLogs(t, r.pods)
	pause, shard := longestPause(handled)
	if pause > maxConsumptionPause {
		t.Errorf("shard %d went %v without a record handled, want at most %v", shard, pause, maxConsumptionPause)
	}
	for _, rep := range r.replicas {
		if rep.proc.Exited() {
			continue
		}
		if err := rep.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := rep.proc.Wait(30 * time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v\n%s", rep.name, err, rep.proc.Output())
		}
	}
	return pause, shard
}

// longestPause is the longest time between two records handled one after
// the other on one shard (handling starts), and that shard. The publisher
// writes every shard many times a second, so a longer gap is a pause in
// consumption.
func longestPause(handled []handledRecord) (time.Duration, int) {
	byShard := map[int][]int64{}
	for _, h := range handled {
		byShard[h.Shard] = append(byShard[h.Shard], h.StartedAt)
	}
	var longest time.Duration
	at := -1
	for shard, starts := range byShard {
		slices.Sort(starts)
		for i := 1; i < len(starts); i++ {
			if gap := time.Duration(starts[i] - starts[i-1]); gap > longest {
				longest, at = gap, shard
			}
		}
	}
	return longest, at
}

func TestLongestPause(t *testing.T) {
	s := int64(time.Second)
	got, shard := longestPause([]handledRecord{
		{Shard: 0, StartedAt: 1 * s}, {Shard: 1, StartedAt: 2 * s}, {Shard: 0, StartedAt: 3 * s},
		{Shard: 1, StartedAt: 7 * s}, {Shard: 0, StartedAt: 4 * s}, {Shard: 1, StartedAt: 6 * s},
	})
	if got != 4*time.Second || shard != 1 {
		t.Fatalf("longestPause = %v on shard %d, want 4s on shard 1", got, shard)
	}
}

// Lengths of the gray failures of TestClusterGrayFailuresKeepConsumption.
// Each outlasts what a member could survive on the faulty replica alone,
// so that a member that did not move on would lose its lease and close a
// window, which fails the run: the member lease (6 s) plus a heartbeat
// interval (1 s) for the freeze; for the cut, also the etcd lease (2 s)
// during which the cut replica still serves.
const (
	grayFreeze = 8 * time.Second
	grayCut    = 9 * time.Second
	// grayTail is the steady traffic after the faults, before the
	// publisher stops: consumption through the replicas as they are then.
	grayTail = 3 * time.Second
)

// TestClusterGrayFailuresKeepConsumption runs both gray failures of a
// replica in one publishing run (1,000 records a second, 3 pods, 12
// shards, from before the first fault until grayTail after the second),
// one after the other:
//
//  1. The replica that runs the stream is SIGSTOPped for grayFreeze.
//     Another replica takes the stream over, and the members renew their
//     leases through it: their clients move on from the frozen URL and
//     hedge held heartbeats.
//  2. The replica that runs the stream then is cut off from etcd for
//     grayCut (its etcd proxies stop moving bytes) while members still
//     reach it. It stops serving once it cannot confirm its lease and says
//     so, so that the members move on, and another replica takes the
//     stream over.
//
// The run is then checked record by record: every record handled, no
// ownership window closed after settling, no shard read by two members at
// once, and no shard paused longer than maxConsumptionPause.
func TestClusterGrayFailuresKeepConsumption(t *testing.T) {
	r := startClusterFaultRun(t, 12, 1000)

	frozen := r.owner()
	if err := frozen.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	next, took := r.awaitOtherOwner(frozen, frozenAt)
	r.hold(frozenAt, grayFreeze)
	if err := frozen.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("owner %s frozen %v; %s took the stream over after %v", frozen.name, grayFreeze, next, took)

	cut := r.owner()
	for _, p := range r.etcdProxies[cut.name] {
		p.Pause()
	}
	cutAt := time.Now()
	next, took = r.awaitOtherOwner(cut, cutAt)
	r.hold(cutAt, grayCut)
	for _, p := range r.etcdProxies[cut.name] {
		p.Resume()
	}
	t.Logf("owner %s cut off from etcd %v; %s took the stream over after %v", cut.name, grayCut, next, took)
	r.hold(time.Now(), grayTail)

	pause, shard := r.check()
	t.Logf("longest consumption pause %v (shard %d)", pause, shard)
}
