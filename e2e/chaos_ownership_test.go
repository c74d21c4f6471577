package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"time"

	"github.com/rscoord/rscoord/internal/poll"
)

// injectOwnership runs one of the ownership faults (fault number i of
// kind). It returns the incarnation whose members must have started again
// before the group counts as recovered (nil: none), the time their starts
// count from, and the time recovery is measured from. A fault that did
// not fire as described fails the test: it would prove nothing.
func (r *chaosRun) injectOwnership(i int, kind string) (startedBy *incarnation, since int64, from time.Time) {
	t := r.t
	switch kind {
	case faultHandlerStop:
		// SIGUSR1 makes the pod's next handler hold its record until its
		// context is cancelled; the pod is frozen while it holds, past
		// its lease. After SIGCONT the lease has lapsed: the handler's
		// context must be cancelled at once (its record is not handled
		// and stays pending), the shards stop, and nothing read after the
		// freeze reaches a handler.
		p := r.rng.IntN(chaosPods)
		inc := r.live[p]
		held := countLines(inc, "chaos: handler holding")
		ended := countLines(inc, "chaos: handler hold ended")
		if err := inc.proc.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if !waitLines(inc, "chaos: handler holding", held+1, 5*time.Second) {
			t.Errorf("fault %d (%s): %s never held a handler after SIGUSR1", i, kind, inc.label())
			return nil, 0, time.Now()
		}
		d := chaosLease + r.between(1500*time.Millisecond, 3*time.Second)
		t.Logf("fault %d: %s holds a handler; SIGSTOP it for %v", i, inc.label(), d)
		fz := freeze{stop: r.sigstop(inc)}
		poll.Hold(t.Context(), d)
		r.proxies[p].forget()
		fz.cont = time.Now().UnixNano()
		if err := inc.proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		inc.freezes = append(inc.freezes, fz)
		r.allowedFences += chaosPerPod
		if !waitLines(inc, "chaos: handler hold ended", ended+1, thawStopSlack) {
			t.Errorf("fault %d (%s): the held handler of %s was still running %v after SIGCONT: its context was not cancelled when its lease lapsed",
				i, kind, inc.label(), thawStopSlack)
		} else if line := nthLine(inc, "chaos: handler hold ended", ended); !strings.Contains(line, `"cancelled":true`) {
			t.Errorf("fault %d (%s): the held handler of %s ended without its context cancelled: %s", i, kind, inc.label(), line)
		} else {
			r.holdsCut++
		}
		return inc, fz.cont, time.Unix(0, fz.cont)

	case faultDuplicateID:
		// A second process with pod p's member ids (same POD_NAME, other
		// instanceId) while the first one is alive: it must never be
		// granted anything (RETRY), and the live one keeps its shards.
		p := r.rng.IntN(chaosPods)
		before := r.scrapeMetric(metricDuplicates)
		dup := r.startPodAs(p, false)
		d := r.between(2*time.Second, 3*time.Second)
		t.Logf("fault %d: %s runs with the member ids of %s for %v after its first join is refused", i, dup.label(), r.live[p].label(), d)
		// A loaded machine may take seconds to start the process: the
		// time counts from its first refused join.
		after := before
		poll.Wait(15*time.Second, 50*time.Millisecond, func() bool { after = r.scrapeMetric(metricDuplicates); return after > before })
		// For d the duplicate keeps asking and is never granted a shard:
		// checked all along, so a grant fails the fault at once.
		granted := func() bool {
			for _, e := range readJSONLines[ownershipEvent](t, dup.ownership) {
				if e.Event == "start" {
					return true
				}
			}
			return false
		}
		poll.Stays(d, 100*time.Millisecond, func() bool { return !granted() })
		after = r.scrapeMetric(metricDuplicates)
		if err := dup.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := dup.proc.Wait(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", dup.label(), err)
		}
		dup.end = time.Now().UnixNano()
		if after <= before {
			t.Errorf("fault %d (%s): %s ran beside %s but the coordinator counted no duplicate join (%s %v → %v); its output:\n%s",
				i, kind, dup.label(), r.live[p].label(), metricDuplicates, before, after, dup.proc.Output())
		}
		r.duplicateRetries += max(after-before, 0)
		for _, e := range readJSONLines[ownershipEvent](t, dup.ownership) {
			if e.Event == "start" {
				t.Errorf("fault %d (%s): the duplicate %s started reading shard %d as %s", i, kind, dup.label(), e.Shard, e.MemberID)
			}
		}
		return nil, 0, time.Now()

	case faultStaleInc:
		// Pod p is frozen past its lease; a new process takes its member
		// ids (it is answered RETRY until the frozen one's lease lapses,
		// then joins); then the frozen one is thawed: its heartbeats are
		// a stale incarnation's, fenced alone, and the new process keeps
		// its shards.
		p := r.rng.IntN(chaosPods)
		old := r.live[p]
		before := r.scrapeMetric(metricStale)
		fz := freeze{stop: r.sigstop(old)}
		repl := r.startPod(p)
		startNs := repl.startNs()
		t.Logf("fault %d: SIGSTOP %s, start %s with its member ids", i, old.label(), repl.label())
		if !poll.Wait(chaosLease+15*time.Second, 50*time.Millisecond, func() bool { return repl.bothStartedAfter(t, startNs) }) {
			t.Errorf("fault %d (%s): %s did not take over the member ids of the frozen %s", i, kind, repl.label(), old.label())
		}
		// The frozen one stays frozen a little longer, beside its
		// replacement at work.
		poll.Hold(t.Context(), r.between(200*time.Millisecond, time.Second))
		r.proxies[p].forget()
		fz.cont = time.Now().UnixNano()
		if err := old.proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		old.freezes = append(old.freezes, fz)
		// Its members expired while frozen; thawed, each is fenced.
		r.allowedFences += chaosPerPod
		t.Logf("fault %d: SIGCONT %s after %v, beside %s", i, old.label(), time.Duration(fz.cont-fz.stop).Round(time.Millisecond), repl.label())
		after := before
		poll.Wait(5*time.Second, 50*time.Millisecond, func() bool { after = r.scrapeMetric(metricStale); return after > before })
		if after <= before {
			t.Errorf("fault %d (%s): the thawed %s was not counted as a stale incarnation (%s %v → %v)", i, kind, old.label(), metricStale, before, after)
		}
		r.staleFences += max(after-before, 0)
		// It keeps asking for a second, and is kept out all along: no
		// window of its own opens after the thaw.
		regranted := func() bool {
			for _, e := range readJSONLines[ownershipEvent](t, old.ownership) {
				if e.Event == "start" && e.AtNanos > fz.cont {
					return true
				}
			}
			return false
		}
		if !poll.Stays(time.Second, 100*time.Millisecond, func() bool { return !regranted() }) {
			t.Errorf("fault %d (%s): the thawed %s was granted a shard beside %s, which holds its member ids", i, kind, old.label(), repl.label())
		}
		if err := old.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := old.proc.Wait(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", old.label(), err)
		}
		old.end = time.Now().UnixNano()
		return repl, startNs, time.Unix(0, fz.cont)

	case faultRefuse:
		// Every pod but p ignores revocations (its proxy puts taken
		// shards back into the answers, so its members go on reading
		// them); pod p restarts, so the others must give shards up to
		// it. They refuse past the rebalance deadline: the coordinator
		// must not grant those shards until the refusers are told
		// (fenced) and rejoin, or their leases lapse.
		p := r.rng.IntN(chaosPods)
		inc := r.live[p]
		r.refuseOpen.Store(true)
		var before, fencedBefore [chaosPods]int
		for q := range chaosPods {
			if q != p {
				before[q], fencedBefore[q], _ = r.proxies[q].refuseStats()
				r.proxies[q].setRefuse(true)
			}
		}
		t.Logf("fault %d: every pod but pod-%d refuses to release; restart %s", i, p, inc.label())
		if err := inc.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := inc.proc.Wait(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", inc.label(), err)
		}
		inc.end = time.Now().UnixNano()
		r.proxies[p].forget()
		repl := r.startPod(p)
		startNs := repl.startNs()
		from = time.Now()
		// Refuse until every refusal was answered with a fence (the
		// rebalance deadline), then behave again; after the first fence
		// no new refusals start (the rebalance it causes would start
		// another round: see hbProxy.refuseOpen).
		refused, fenced := 0, 0
		poll.Wait(chaosRebalance+chaosLease+10*time.Second, 50*time.Millisecond, func() bool {
			refused, fenced = 0, 0
			for q := range chaosPods {
				if q != p {
					n, f, _ := r.proxies[q].refuseStats()
					refused, fenced = refused+n-before[q], fenced+f-fencedBefore[q]
				}
			}
			return refused > 0 && r.nothingKept(p)
		})
		for q := range chaosPods {
			if q != p {
				r.proxies[q].setRefuse(false)
				_, _, hist := r.proxies[q].refuseStats()
				for _, h := range hist {
					t.Logf("fault %d: %s", i, h)
				}
			}
		}
		if refused == 0 {
			t.Errorf("fault %d (%s): no member was asked to give a shard up while refusing", i, kind)
		}
		r.refusals += refused
		// Each refuser was fenced at its rebalance deadline, on purpose.
		r.allowedFences += fenced
		t.Logf("fault %d: %d shards refused, %d fences of refusing members", i, refused, fenced)
		return repl, startNs, from

	case faultLostJoin:
		// Pod p restarts and the answer to each member's join is lost
		// (the coordinator granted it; the member never hears it): the
		// retry, same requestId and incarnation, must be answered as the
		// same join, never fenced, and nothing may be read twice.
		p := r.rng.IntN(chaosPods)
		inc := r.live[p]
		before := r.proxies[p].joinDropCount()
		r.proxies[p].setDropJoin(true)
		t.Logf("fault %d: restart %s, dropping each member's join answer", i, inc.label())
		if err := inc.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := inc.proc.Wait(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", inc.label(), err)
		}
		inc.end = time.Now().UnixNano()
		r.proxies[p].forget()
		repl := r.startPod(p)
		startNs := repl.startNs()
		from = time.Now()
		poll.Wait(10*time.Second, 20*time.Millisecond, func() bool { return r.proxies[p].joinDropCount()-before >= chaosPerPod })
		r.proxies[p].setDropJoin(false)
		dropped := r.proxies[p].joinDropCount() - before
		if dropped == 0 {
			t.Errorf("fault %d (%s): no join answer of %s was dropped", i, kind, repl.label())
		}
		r.joinDrops += dropped
		return repl, startNs, from

	case faultLateCopy:
		// Every heartbeat of pod p is delivered a second time, late and
		// without its requestSeq, as a reference client's copy held up in
		// the network would be, while pod q restarts: its members leave
		// and join again, so p's members are granted shards and have some
		// taken away between a copy and its delivery. A copy may report
		// less than its member reads by then; it must free nothing the
		// member still reads (docs/protocol.md §9.1). Most copies carry
		// an epoch older than the member's previous one and fence it, as
		// a zombie's heartbeat does; the member rejoins. The precise case
		// the release rule exists for (a copy at the previous epoch that
		// lacks a same-epoch grant) is timing-bound here: the assign
		// simulation and TestLateReferenceReportFreesNothing produce it
		// every time.
		p := r.rng.IntN(chaosPods)
		q := (p + 1 + r.rng.IntN(chaosPods-1)) % chaosPods
		delay := r.between(800*time.Millisecond, 2500*time.Millisecond)
		sentBefore, fencedBefore := r.proxies[p].lateStats()
		inc := r.live[q]
		t.Logf("fault %d: deliver every heartbeat of pod-%d again %v late without requestSeq, while %s restarts", i, p, delay, inc.label())
		r.proxies[p].setLateCopy(delay)
		if err := inc.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := inc.proc.Wait(40 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", inc.label(), err)
		}
		inc.end = time.Now().UnixNano()
		r.proxies[q].forget()
		repl := r.startPod(q)
		startNs := repl.startNs()
		// The rebalance after the join, copied: once the new members
		// read (a loaded machine may take seconds to start the pod), the
		// copies of the heartbeats that led there arrive delay later.
		poll.Wait(chaosLease+15*time.Second, 50*time.Millisecond, func() bool { return repl.bothStartedAfter(t, startNs) })
		poll.Hold(t.Context(), delay+200*time.Millisecond)
		r.proxies[p].setLateCopy(0)
		sent, fenced := r.proxies[p].lateStats()
		sent, fenced = sent-sentBefore, fenced-fencedBefore
		if sent == 0 {
			t.Errorf("fault %d (%s): no late copy of pod-%d's heartbeats reached the coordinator", i, kind, p)
		}
		r.lateCopies += sent
		// A copy carrying an epoch older than the member's previous one
		// fences it, as a zombie's heartbeat does: on purpose.
		r.allowedFences += fenced
		r.proxies[p].forget()
		t.Logf("fault %d: %d late copies delivered, %d answered as fenced", i, sent, fenced)
		return repl, startNs, time.Now()
	}
	t.Fatalf("unknown fault kind %q", kind)
	return nil, 0, time.Time{}
}

// sigstop freezes inc and returns when every thread of it is stopped
// (ns): a window cut at the freeze must not end before the process really
// stopped, and SIGSTOP takes effect a little after it is sent.
func (r *chaosRun) sigstop(inc *incarnation) int64 {
	t := r.t
	if err := inc.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	return time.Now().UnixNano()
}

// nothingKept reports whether no proxy but p's holds a refused shard
// that its member was not yet fenced for.
func (r *chaosRun) nothingKept(p int) bool {
	for q, px := range r.proxies {
		if q == p {
			continue
		}
		px.mu.Lock()
		n := 0
		for _, k := range px.kept {
			n += len(k)
		}
		px.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// countLines counts the lines of inc's output whose log message is msg.
func countLines(inc *incarnation, msg string) int {
	n := 0
	for _, l := range strings.Split(inc.proc.Output(), "\n") {
		if logMsg(l) == msg {
			n++
		}
	}
	return n
}

// nthLine is the n-th (from 0) line of inc's output whose message is msg.
func nthLine(inc *incarnation, msg string, n int) string {
	for _, l := range strings.Split(inc.proc.Output(), "\n") {
		if logMsg(l) == msg {
			if n == 0 {
				return l
			}
			n--
		}
	}
	return ""
}

// waitLines waits until inc printed at least n lines with message msg.
func waitLines(inc *incarnation, msg string, n int, limit time.Duration) bool {
	return poll.Wait(limit, 10*time.Millisecond, func() bool { return countLines(inc, msg) >= n })
}

// logMsg is the "msg" of a JSON log line, else "".
func logMsg(line string) string {
	if !strings.HasPrefix(line, "{") {
		return ""
	}
	var l struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal([]byte(line), &l) != nil {
		return ""
	}
	return l.Msg
}
