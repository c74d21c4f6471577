package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// Flags of TestChaos. Replay a failed run with the seed it printed:
//
//	go test -tags chaos -run TestChaos ./e2e -chaos.seed=N -chaos.runs=1
var (
	chaosSeed   = flag.Uint64("chaos.seed", 0, "seed of the first chaos run (0: the mode's default; with -tags chaos a fresh one)")
	chaosRuns   = flag.Int("chaos.runs", 1, "number of seeded chaos runs (seeds seed, seed+1, …)")
	chaosFaults = flag.Int("chaos.faults", 0, "faults per chaos run (0: the mode's default)")
)

// Fault kinds of the schedule.
const (
	faultCoordKill       = "coord-kill"
	faultConsumerKill    = "consumer-kill"
	faultConsumerStop    = "consumer-sigstop"
	faultConsumerRestart = "consumer-restart"
	faultHBDrop          = "hb-drop"
	faultHBDelay         = "hb-delay"
	faultRedisRestart    = "redis-restart"
	// Faults of the ownership promise: a pod frozen in the middle of a
	// handler past its lease; a second process with a live pod's member
	// ids; a stale incarnation coming back after its members expired and
	// a new process took their ids; members alive but refusing to release
	// past their rebalance deadline; a lost join answer.
	faultHandlerStop = "handler-sigstop"
	faultDuplicateID = "duplicate-id"
	faultStaleInc    = "stale-incarnation"
	faultRefuse      = "refuse-release"
	faultLostJoin    = "lost-join-answer"
	// faultLateCopy: late copies of a pod's heartbeats, without
	// requestSeq (a reference client's), across a rebalance.
	faultLateCopy = "late-copy"
)

var faultKinds = []string{faultCoordKill, faultConsumerKill, faultConsumerStop, faultConsumerRestart,
	faultHBDrop, faultHBDelay, faultRedisRestart,
	faultHandlerStop, faultDuplicateID, faultStaleInc, faultRefuse, faultLostJoin, faultLateCopy}

// shortKinds is the schedule of the short mode (part of go tool task
// test): the ownership faults, in a seeded order.
var shortKinds = []string{faultHandlerStop, faultDuplicateID, faultStaleInc, faultRefuse, faultLostJoin, faultLateCopy}

const (
	chaosShards = 8
	chaosPods   = 3
	chaosPerPod = 2 // --concurrency: members per pod
	chaosRate   = 800
	chaosLease  = 3 * time.Second
	chaosHB     = 500 * time.Millisecond
	chaosBlock  = time.Second // consumer-pod's default --block
	// chaosRebalance is the coordinator's --rebalance-timeout: members
	// refusing to release are fenced at it.
	chaosRebalance = 4 * time.Second
	// chaosHold bounds a handler held by SIGUSR1 (--hold-on-signal); its
	// context must be cancelled long before.
	chaosHold     = 30 * time.Second
	thawStopSlack = 2 * time.Second
	// recoveryBudget: a group must be STABLE again within the member lease
	// plus two heartbeat intervals after a fault ends (a killed pod's fault
	// "ends" at the kill: its lease has to run out first).
	recoveryBudget = chaosLease + 2*chaosHB
)

// TestChaos runs seeded fault schedules over a real coordinator, a 3-master
// Redis Cluster, 3 consumer pods (2 members each, each pod behind its own
// heartbeat proxy) and a publisher, then checks at-least-once delivery,
// no overlapping ownership windows of one shard, every handled record
// inside a window of its own member incarnation, no fence caused by a
// lost heartbeat answer, and recovery time; each fault checks that it
// fired. Without -tags chaos it runs one short schedule: the six
// ownership faults once each.
func TestChaos(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = chaosDefaultSeed
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) % 1_000_000
	}
	faults := *chaosFaults
	if faults <= 0 {
		faults = chaosDefaultFaults
	}
	runs := max(*chaosRuns, 1)
	b := build(t)
	var summaries []string
	for i := range runs {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Logf("chaos seed %d, %d faults (replay: go test -tags chaos -run TestChaos ./e2e -chaos.seed=%d -chaos.faults=%d)", s, faults, s, faults)
			r := &chaosRun{t: t, seed: s, rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), b: b, dir: t.TempDir(),
				faults: map[string]int{}, metricsBefore: map[string]float64{}}
			sum := r.run(faults)
			summaries = append(summaries, sum)
			t.Log(sum)
		})
	}
	if runs > 1 {
		t.Logf("all runs:\n%s", strings.Join(summaries, "\n"))
	}
}

// incarnation is one run of a consumer pod process.
type incarnation struct {
	pod       int
	n         int // incarnation number of the pod, from 0
	proc      *proctest.Process
	events    string
	ownership string
	// end: when it stopped reading for sure (its kill, or its exit).
	end     int64
	freezes []freeze
}

func (inc *incarnation) label() string { return fmt.Sprintf("pod-%d.%d", inc.pod, inc.n) }

// freeze is one SIGSTOP..SIGCONT of an incarnation (ns).
type freeze struct{ stop, cont int64 }

// crashWindow: records written to node between a SAVE and the SIGKILL that
// followed are lost with the crash (the restarted node loads the SAVE).
type crashWindow struct {
	node         int
	fromMs, toMs int64
}

type chaosRun struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	b    bins
	dir  string

	cluster    *redistest.Cluster
	redisAddrs string
	coord      *proctest.Process
	coordURL   string
	coordPort  int
	proxies    [chaosPods]*hbProxy
	refuseOpen atomic.Bool // shared by the proxies (hbProxy.refuseOpen)
	httpc      *http.Client
	transport  *http.Transport

	incs []*incarnation
	live [chaosPods]*incarnation

	faults map[string]int
	// metricsBefore sums counters of coordinator processes killed already.
	metricsBefore map[string]float64
	allowedFences int
	// What the ownership faults did, to show each of them fired.
	holdsCut         int // held handlers whose context was cancelled after the thaw
	duplicateRetries float64
	staleFences      float64
	refusals         int
	joinDrops        int
	lateCopies       int
	crashes          []crashWindow
	overNominal      int // consumer kills that recovered after lease + 2 heartbeats
	slowest          time.Duration
	slowestKind      string
}

func (r *chaosRun) run(nFaults int) string {
	t := r.t
	ctx := context.Background()
	r.transport = &http.Transport{}
	r.httpc = &http.Client{Transport: r.transport, Timeout: 2 * time.Second}
	t.Cleanup(r.transport.CloseIdleConnections)
	r.cluster = redistest.NewCluster(t)
	r.redisAddrs = strings.Join(r.cluster.Addrs, ",")
	r.coordPort = chaosFreePort(t)
	r.coordURL = fmt.Sprintf("http://127.0.0.1:%d", r.coordPort)
	r.startCoordinator()
	remote(t, r.coordURL).CreateStream("orders", chaosShards)
	if err := redistest.CreateShards(ctx, r.cluster.Client(), "orders", chaosShards, "orders"); err != nil {
		t.Fatal(err)
	}
	for i := range chaosPods {
		r.proxies[i] = newHBProxy(r.coordURL, &r.refuseOpen)
		t.Cleanup(r.proxies[i].Close)
	}
	for i := range chaosPods {
		r.startPod(i)
	}
	published := filepath.Join(r.dir, "published.jsonl")
	pub := proctest.Start(t, "publisher", r.b.publisher, []string{
		"--coordinator", r.coordURL, "--redis", r.redisAddrs, "--stream", "orders", "--group", "orders",
		"--count", "100000000", "--rate", strconv.Itoa(chaosRate), "--batch", "20", "--published-log", published,
		"--retry-timeout", "30s",
	}, memberEnv()...)
	if d, ok := r.waitRecovered(time.Now(), 30*time.Second, nil); !ok {
		t.Fatalf("the group never became STABLE at the start (%v)", d)
	}
	// Every pod at work before the first fault.
	for _, inc := range r.live {
		awaitLines(t, inc.events, 20, 30*time.Second)
	}

	// The schedule: kinds from a seeded shuffle (each kind once before any
	// repeats), targets and durations drawn from the same source.
	var kinds []string
	for len(kinds) < nFaults {
		perm := slices.Clone(faultKinds)
		if !chaosLong {
			perm = slices.Clone(shortKinds)
		}
		r.rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		kinds = append(kinds, perm...)
	}
	kinds = kinds[:nFaults]
	for i, kind := range kinds {
		r.inject(i, kind)
		// A seeded gap of steady traffic before the next fault.
		poll.Hold(t.Context(), r.between(300*time.Millisecond, 1200*time.Millisecond))
	}

	// Faults are over: stop publishing, then wait for every record.
	if err := pub.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(60 * time.Second); err != nil {
		t.Errorf("publisher: %v", err)
	}
	nPublished, nHandled, handlings, lost := r.checkHandled(published)

	for _, inc := range r.live {
		if err := inc.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := inc.proc.Wait(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", inc.label(), err)
		}
		inc.end = time.Now().UnixNano()
	}
	nOverlaps, nOutside, postThaw, takeovers := r.checkOwnership()
	if r.faults[faultConsumerStop] > 0 && takeovers == 0 {
		t.Errorf("%d SIGSTOPs past the lease, but no shard of a frozen pod moved to another member while it was frozen", r.faults[faultConsumerStop])
	}
	needless := r.checkFences()

	if err := r.coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r.coord.Wait(30 * time.Second); err != nil {
		t.Errorf("coordinator after SIGTERM: %v", err)
	}
	var byKind []string
	for _, k := range faultKinds {
		if r.faults[k] > 0 {
			byKind = append(byKind, fmt.Sprintf("%s=%d", k, r.faults[k]))
		}
	}
	return fmt.Sprintf("chaos seed=%d faults[%s] published=%d handled=%d handlings=%d lost-in-redis-crash=%d overlaps=%d outside-window=%d frozen-shards-taken-over=%d post-thaw-handlings=%d unnecessary-fences=%d held-handlers-cancelled=%d duplicate-retries=%v stale-incarnation-fences=%v refused-shards=%d join-answers-dropped=%d late-copies=%d slowest-recovery=%v(%s) kill-recoveries-over-lease+2hb=%d",
		r.seed, strings.Join(byKind, " "), nPublished, nHandled, handlings, lost, nOverlaps, nOutside, takeovers, postThaw, needless,
		r.holdsCut, r.duplicateRetries, r.staleFences, r.refusals, r.joinDrops, r.lateCopies,
		r.slowest.Round(time.Millisecond), r.slowestKind, r.overNominal)
}

// between draws a duration in [lo, hi).
func (r *chaosRun) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)))
}

func chaosFreePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCoordinator runs the coordinator on the run's fixed port and data
// dir, so a restart keeps its state and its URL.
func (r *chaosRun) startCoordinator() {
	t := r.t
	var err error
	// The port (or the store's lock) may not be free yet right after a
	// kill: a start that exits at once is tried again, for 10 s.
	if !poll.Wait(10*time.Second, 200*time.Millisecond, func() bool {
		p := proctest.Start(t, "coordinator", r.b.coordinator, []string{"serve",
			"--listen", fmt.Sprintf("127.0.0.1:%d", r.coordPort), "--data-dir", filepath.Join(r.dir, "coord"),
			"--users", usersFile(t), "--log-format", "json", "--member-lease", memberLease, "--heartbeat-interval", heartbeatInterval,
			"--rebalance-timeout", chaosRebalance.String()}, adminEnv()...)
		_, err = p.WaitForLine(30*time.Second, func(l string) bool { return strings.Contains(l, `"rscoord listening"`) })
		if err == nil {
			r.coord = p
			return true
		}
		if !p.Exited() {
			t.Fatal(err)
		}
		return false
	}) {
		t.Fatal(err)
	}
}

// startPod starts a new incarnation of pod i and makes it the live one.
func (r *chaosRun) startPod(i int) *incarnation { return r.startPodAs(i, true) }

// startPodAs starts a new incarnation of pod i (same POD_NAME, so the same
// member ids, but its own log files), the live one of pod i or not (a
// duplicate, or the new process beside a frozen one). Each pod talks to
// the coordinator through its own heartbeat proxy.
func (r *chaosRun) startPodAs(i int, live bool) *incarnation {
	n := 0
	for _, inc := range r.incs {
		if inc.pod == i {
			n++
		}
	}
	inc := &incarnation{pod: i, n: n}
	inc.events = filepath.Join(r.dir, inc.label()+"-events.jsonl")
	inc.ownership = filepath.Join(r.dir, inc.label()+"-ownership.jsonl")
	inc.proc = proctest.Start(r.t, inc.label(), r.b.consumer, []string{
		"--coordinator", r.proxies[i].URL(), "--redis", r.redisAddrs, "--stream", "orders", "--group", "orders",
		"--concurrency", strconv.Itoa(chaosPerPod), "--workers", "2", "--handler-delay", "2ms",
		"--member-lease", memberLease, "--claim-min-idle", claimMinIdle,
		"--events-log", inc.events, "--ownership-log", inc.ownership,
		"--hold-on-signal", chaosHold.String(), "--log-format", "json",
	}, append(memberEnv(), fmt.Sprintf("POD_NAME=pod-%d", i))...)
	r.incs = append(r.incs, inc)
	if live {
		r.live[i] = inc
	}
	return inc
}

// inject runs fault number i of kind, then waits for the group to recover
// and records how long that took.
func (r *chaosRun) inject(i int, kind string) {
	t := r.t
	r.faults[kind]++
	var from time.Time // recovery is measured from here
	var startedBy *incarnation
	var since int64
	switch kind {
	case faultCoordKill:
		for _, name := range []string{metricFences, metricDuplicates, metricStale} {
			r.metricsBefore[name] += r.scrapeMetric(name)
		}
		down := r.between(0, time.Second)
		t.Logf("fault %d: SIGKILL the coordinator, restart after %v", i, down)
		if err := r.coord.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r.coord.Wait(10 * time.Second)
		poll.Hold(t.Context(), down)
		r.startCoordinator()
		from = time.Now()
	case faultConsumerKill:
		p := r.rng.IntN(chaosPods)
		inc := r.live[p]
		down := r.between(0, time.Second)
		t.Logf("fault %d: SIGKILL %s, replacement after %v", i, inc.label(), down)
		if err := inc.proc.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		inc.end = time.Now().UnixNano()
		from = time.Now()
		inc.proc.Wait(10 * time.Second)
		r.proxies[p].forget()
		poll.Hold(t.Context(), down)
		startedBy = r.startPod(p)
		since = startedBy.startNs()
	case faultConsumerStop:
		p := r.rng.IntN(chaosPods)
		inc := r.live[p]
		// Long enough for the coordinator to expire both members (lease
		// after their last heartbeat) and hand their shards to others.
		d := chaosLease + r.between(1500*time.Millisecond, 3*time.Second)
		t.Logf("fault %d: SIGSTOP %s for %v", i, inc.label(), d)
		fz := freeze{stop: r.sigstop(inc)}
		poll.Hold(t.Context(), d)
		r.proxies[p].forget()
		fz.cont = time.Now().UnixNano()
		if err := inc.proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		inc.freezes = append(inc.freezes, fz)
		// Both members expire while frozen and are fenced when they come back.
		r.allowedFences += chaosPerPod
		from = time.Now()
		startedBy, since = inc, fz.cont
	case faultConsumerRestart:
		p := r.rng.IntN(chaosPods)
		inc := r.live[p]
		t.Logf("fault %d: SIGTERM %s and start it again", i, inc.label())
		if err := inc.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := inc.proc.Wait(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", inc.label(), err)
		}
		inc.end = time.Now().UnixNano()
		r.proxies[p].forget()
		startedBy = r.startPod(p)
		since = startedBy.startNs()
		from = time.Now()
	case faultHBDrop:
		// Sometimes longer than the member lease: the member then fails
		// closed on its own, but the coordinator still receives its
		// heartbeats, so it must neither expire nor fence it.
		d := r.between(500*time.Millisecond, 5*time.Second)
		t.Logf("fault %d: drop every heartbeat answer to pod-0 for %v", i, d)
		r.proxies[0].set(true, 0)
		poll.Hold(t.Context(), d)
		r.proxies[0].set(false, 0)
		from = time.Now()
	case faultHBDelay:
		d := r.between(2*time.Second, 4*time.Second)
		delay := r.between(200*time.Millisecond, 1500*time.Millisecond)
		t.Logf("fault %d: delay every heartbeat answer to pod-0 by %v for %v", i, delay, d)
		r.proxies[0].set(false, delay)
		poll.Hold(t.Context(), d)
		r.proxies[0].set(false, 0)
		from = time.Now()
	case faultRedisRestart:
		node := r.rng.IntN(len(r.cluster.Nodes))
		s := r.cluster.Nodes[node]
		down := r.between(0, 800*time.Millisecond)
		t.Logf("fault %d: SAVE, SIGKILL and restart Redis master %d (%s) after %v", i, node, s.Addr, down)
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		// A master with persistence: the restart loads this snapshot. Only
		// records written between it and the kill are lost with the crash.
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		w := crashWindow{node: node, fromMs: time.Now().UnixMilli() - 1}
		err := c.Save(ctx).Err()
		c.Close()
		if err != nil {
			t.Fatalf("SAVE on %s: %v", s.Addr, err)
		}
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
		w.toMs = time.Now().UnixMilli() + 1
		r.crashes = append(r.crashes, w)
		poll.Hold(t.Context(), down)
		if err := s.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.cluster.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		from = time.Now()
	default:
		startedBy, since, from = r.injectOwnership(i, kind)
	}
	var extra func() bool
	if startedBy != nil {
		extra = func() bool { return startedBy.bothStartedAfter(r.t, since) }
	}
	took, ok := r.waitRecovered(from, 30*time.Second, extra)
	if !ok {
		t.Errorf("fault %d (%s): the group was not STABLE with every member reading 30 s after the fault ended", i, kind)
		return
	}
	t.Logf("fault %d (%s): recovered in %v", i, kind, took.Round(time.Millisecond))
	if took > r.slowest {
		r.slowest, r.slowestKind = took, kind
	}
	// Every kind, consumer kills included, meets lease + 2 heartbeat
	// intervals: a replacement pod reusing the member ids is answered
	// RETRY with an interval that ends just after the dead incarnation's
	// lease (docs/protocol-notes.md 5b).
	budget := recoveryBudget
	if kind == faultRefuse {
		// The refusing members hold their shards until the rebalance
		// deadline fences them.
		budget += chaosRebalance
	}
	if kind == faultConsumerKill && took > recoveryBudget {
		r.overNominal++
	}
	if took > budget {
		t.Errorf("fault %d (%s): recovery took %v, over the budget of %v", i, kind, took, budget)
	}
}

// startNs is when the incarnation's process was started (about).
func (inc *incarnation) startNs() int64 { return time.Now().UnixNano() - int64(time.Millisecond) }

// bothStartedAfter reports whether every member of inc logged a start
// after since: the pod took part in the group again.
func (inc *incarnation) bothStartedAfter(t *testing.T, since int64) bool {
	started := map[string]bool{}
	for _, e := range readJSONLines[ownershipEvent](t, inc.ownership) {
		if e.Event == "start" && e.AtNanos > since {
			started[e.MemberID] = true
		}
	}
	return len(started) == chaosPerPod
}

// waitRecovered polls the group until it is STABLE with exactly the 6
// expected members in its target, each reading what it was given, and
// extra (if any) holds; it returns the time since from.
func (r *chaosRun) waitRecovered(from time.Time, limit time.Duration, extra func() bool) (time.Duration, bool) {
	want := map[string]bool{}
	for p := range chaosPods {
		for m := range chaosPerPod {
			want[fmt.Sprintf("pod-%d-m%d", p, m)] = true
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), from.Add(limit))
	defer cancel()
	var took time.Duration
	ok := poll.WaitContext(ctx, 25*time.Millisecond, func() bool {
		took = time.Since(from)
		var g protocol.GroupResponse
		if r.getJSON(protocol.BasePath+"/streams/orders/groups/orders", &g) != nil || g.State != protocol.GroupStable {
			return false
		}
		ok := true
		n := 0
		for m, c := range g.TargetAssignmentSummary {
			if c > 0 {
				n++
				ok = ok && want[m] && g.CurrentAssignmentSummary[m] == c
			}
		}
		return ok && n == len(want) && r.everyShardRead() && (extra == nil || extra())
	})
	if !ok {
		took = time.Since(from)
	}
	return took, ok
}

// everyShardRead reports whether the ownership logs of the live pods show
// each shard read by exactly one member now (a member that failed closed,
// say after lost heartbeat answers, must have resumed).
func (r *chaosRun) everyShardRead() bool {
	readers := map[int]int{}
	for _, inc := range r.live {
		open := map[string]bool{}
		for _, e := range readJSONLines[ownershipEvent](r.t, inc.ownership) {
			k := e.MemberID + "@" + strconv.Itoa(e.Shard)
			switch {
			case e.Event == "start" && !open[k]:
				open[k] = true
				readers[e.Shard]++
			case e.Event == "stop" && open[k]:
				delete(open, k)
				readers[e.Shard]--
			}
		}
	}
	for s := range chaosShards {
		if readers[s] != 1 {
			return false
		}
	}
	return true
}

// adminGet sends GET path to the coordinator as its bootstrap admin.
func (r *chaosRun) adminGet(path string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, r.coordURL+path, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("admin", e2eAdminPassword)
	return r.httpc.Do(req)
}

func (r *chaosRun) getJSON(path string, out any) error {
	resp, err := r.adminGet(path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Counters of the coordinator the chaos run reads.
const (
	metricFences     = "rscoord_member_fences_total"
	metricDuplicates = "rscoord_duplicate_member_heartbeats_total"
	metricStale      = "rscoord_stale_incarnation_heartbeats_total"
)

// scrapeMetric reads one counter of the running coordinator. Every counter
// it is asked for is always exported (0 until counted), so a scrape that
// keeps failing for 5 s, or lacks the counter, fails the run: read as 0 it
// would turn the fence check into one that always holds.
func (r *chaosRun) scrapeMetric(name string) float64 {
	var v float64
	var err error
	if !poll.Wait(5*time.Second, 100*time.Millisecond, func() bool { v, err = r.tryScrape(name); return err == nil }) {
		r.t.Errorf("scrape %s: %v", name, err)
		return 0
	}
	return v
}

func (r *chaosRun) tryScrape(name string) (float64, error) {
	resp, err := r.adminGet("/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", l, err)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// checkHandled waits until every published record was handled at least
// once, except records lost with a Redis crash (written after its SAVE),
// and returns the counts.
func (r *chaosRun) checkHandled(published string) (nPublished, nHandled, handlings, lost int) {
	t := r.t
	type publishedRecord struct {
		EventID   string `json:"eventId"`
		StreamKey string `json:"streamKey"`
		RecordID  string `json:"recordId"`
	}
	pubs := readJSONLines[publishedRecord](t, published)
	want := map[string]publishedRecord{}
	for _, p := range pubs {
		want[p.EventID] = p
	}
	nPublished = len(want)
	if nPublished == 0 {
		t.Fatal("nothing was published")
	}
	inCrash := func(p publishedRecord) bool {
		ms, err := strconv.ParseInt(strings.SplitN(p.RecordID, "-", 2)[0], 10, 64)
		if err != nil {
			return false
		}
		node := r.cluster.NodeForSlot(protocol.RedisSlot(p.StreamKey))
		for _, w := range r.crashes {
			if w.node == node && ms >= w.fromMs && ms <= w.toMs {
				return true
			}
		}
		return false
	}
	type handled struct {
		EventID string `json:"eventId"`
	}
	var missing []string
	poll.Wait(60*time.Second, 250*time.Millisecond, func() bool {
		seen := map[string]bool{}
		handlings = 0
		for _, inc := range r.incs {
			hs := readJSONLines[handled](t, inc.events)
			handlings += len(hs)
			for _, h := range hs {
				seen[h.EventID] = true
			}
		}
		missing, lost, nHandled = missing[:0], 0, 0
		for id, p := range want {
			switch {
			case seen[id]:
				nHandled++
			case inCrash(p):
				lost++
			default:
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("%d of %d published records were never handled, e.g. %v", len(missing), nPublished, missing[:min(5, len(missing))])
	}
	return nPublished, nHandled, handlings, lost
}

// checkOwnership checks that no two member incarnations read one shard at
// overlapping times and that every handled record's handler started inside
// a window of its own incarnation.
//
// What the logs can prove: a pod writes "start" before its first read of
// a shard and "stop" once its reads stopped and its handlers returned. A
// killed incarnation's open intervals end at its kill. A SIGSTOPped pod
// cannot write while frozen: it writes its "stop" (lease expired) after
// SIGCONT, with the time of writing. Frozen, it reads nothing, so its
// interval is cut at the SIGSTOP, provided the stop line came promptly
// after SIGCONT and nothing it read after the freeze reached a handler
// (events of records newer than the freeze plus one XREADGROUP block). The
// logs cannot show a read issued just before the freeze and served by Redis
// while frozen: that one is bounded by the member's own lease (reads never
// block past it), which ends before the coordinator's.
func (r *chaosRun) checkOwnership() (nOverlaps, nOutside, postThaw, takeovers int) {
	t := r.t
	byShard := map[int][]interval{}
	type frozen struct {
		inc   *incarnation
		shard int
		fz    freeze
	}
	var froze []frozen
	var records []handledRecord
	for _, inc := range r.incs {
		if inc.end == 0 {
			// Its open windows would end at 0, before they started, and
			// overlap nothing.
			t.Errorf("%s: end not set before the ownership check", inc.label())
		}
		evs := readJSONLines[ownershipEvent](t, inc.ownership)
		for i := range evs {
			evs[i].MemberID += "@" + inc.label()
		}
		recs := readJSONLines[handledRecord](t, inc.events)
		for i := range recs {
			recs[i].MemberID += "@" + inc.label()
		}
		records = append(records, recs...)
		ivs := intervals(evs, inc.end)
		for _, fz := range inc.freezes {
			for shard, list := range ivs {
				for k := range list {
					iv := &list[k]
					if iv.start >= fz.stop || iv.stop <= fz.cont {
						continue
					}
					if iv.stop > fz.cont+int64(thawStopSlack) {
						t.Errorf("%s: shard %d not stopped within %v of SIGCONT after a freeze past its lease (stop at +%v)",
							iv.member, shard, thawStopSlack, time.Duration(iv.stop-fz.cont))
						continue
					}
					iv.stop = fz.stop
					froze = append(froze, frozen{inc, shard, fz})
				}
			}
			postThaw += r.checkThaw(inc, evs, fz)
		}
		for shard, list := range ivs {
			byShard[shard] = append(byShard[shard], list...)
		}
	}
	if len(byShard) != chaosShards {
		t.Errorf("ownership logs cover %d shards, want %d", len(byShard), chaosShards)
	}
	// A freeze tests the lease only if another member took the frozen
	// member's shard while it was frozen.
	for _, f := range froze {
		for _, iv := range byShard[f.shard] {
			if !strings.HasSuffix(iv.member, "@"+f.inc.label()) && iv.start > f.fz.stop && iv.start < f.fz.cont {
				takeovers++
				break
			}
		}
	}
	o := overlaps(byShard)
	if len(o) > 0 {
		t.Errorf("%d overlapping reads:\n%s", len(o), strings.Join(o, "\n"))
	}
	// Cut at its freeze, a frozen member's window still holds the records
	// whose handlers started before the freeze; a record dispatched after
	// SIGCONT under the lapsed ownership falls outside it.
	out := outsideWindows(records, byShard)
	if len(out) > 0 {
		t.Errorf("%d of %d records handled outside their member's window:\n%s", len(out), len(records), strings.Join(out[:min(50, len(out))], "\n"))
	}
	return len(o), len(out), postThaw, takeovers
}

// checkThaw looks at what inc handled after SIGCONT and before it started
// a shard again: only records read before the freeze may show up there
// (handlers that were frozen mid-record; their ACK is refused). It returns
// how many there were and flags records read after the freeze.
func (r *chaosRun) checkThaw(inc *incarnation, evs []ownershipEvent, fz freeze) int {
	type handled struct {
		MemberID  string `json:"memberId"`
		StreamKey string `json:"streamKey"`
		RecordID  string `json:"recordId"`
		At        int64  `json:"handledAtUnixNano"`
	}
	restart := map[string]int64{} // member@shard → first start after the thaw
	for _, e := range evs {
		k := strings.SplitN(e.MemberID, "@", 2)[0] + "@" + strconv.Itoa(e.Shard)
		if e.Event == "start" && e.AtNanos > fz.cont {
			if _, ok := restart[k]; !ok {
				restart[k] = e.AtNanos
			}
		}
	}
	n := 0
	newest := fz.stop/int64(time.Millisecond) + chaosBlock.Milliseconds() + 100
	for _, h := range readJSONLines[handled](r.t, inc.events) {
		if h.At <= fz.cont {
			continue
		}
		shard := h.StreamKey[strings.LastIndexByte(h.StreamKey, ':')+1:]
		if at, ok := restart[h.MemberID+"@"+shard]; ok && h.At >= at {
			continue
		}
		n++
		ms, _ := strconv.ParseInt(strings.SplitN(h.RecordID, "-", 2)[0], 10, 64)
		if ms > newest {
			r.t.Errorf("%s (%s) handled %s %s after SIGCONT before rejoining: that record was written after the freeze, so it was read after the lease expired",
				h.MemberID, inc.label(), h.StreamKey, h.RecordID)
		}
	}
	return n
}

// checkFences compares fences with those caused on purpose: the proxy
// counts fence answers after a lost answer (always needless); the metric
// (summed over coordinator processes) must not exceed the fences the
// schedule caused (members frozen past their lease).
func (r *chaosRun) checkFences() int {
	t := r.t
	var dropped, delayed int
	var needless []string
	for _, p := range r.proxies {
		d, l, n := p.stats()
		dropped, delayed, needless = dropped+d, delayed+l, append(needless, n...)
	}
	total := r.metricsBefore[metricFences] + r.scrapeMetric(metricFences)
	unexplained := max(0, int(total)-r.allowedFences)
	t.Logf("heartbeat answers dropped %d, delayed %d; fences: metric %v, caused on purpose ≤ %d", dropped, delayed, total, r.allowedFences)
	if len(needless) > 0 {
		t.Errorf("%d fences after a lost heartbeat answer:\n%s", len(needless), strings.Join(needless, "\n"))
	}
	if unexplained > 0 {
		t.Errorf("rscoord_member_fences_total %v exceeds the %d fences the schedule caused", total, r.allowedFences)
	}
	return max(len(needless), unexplained)
}
