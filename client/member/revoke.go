package member

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
)

// revocation is a shard the member is giving up, reported in
// revokingShards until the coordinator has seen it REVOKED.
type revocation struct {
	// run is the run being drained; nil when nothing was reading.
	run *shardRun
	// drained: reads stopped and nothing is in flight (or it was
	// abandoned); the shard waits for the rest of its cohort.
	drained bool
	// released: its whole cohort drained and OnRevoked ran: reported
	// REVOKED with inFlight 0.
	released   bool
	releasedAt time.Time
	cohort     *cohort
}

// cohort is the set of shards one answer (or one leave) took from the
// member: OnRevoked is called once for all of them, when the last one has
// drained, and they are reported REVOKED together right after.
type cohort struct {
	shards  []int
	waiting int // shards not drained yet
	reason  Reason
}

// reading reports whether a read loop of the member is still running.
func (a *memberActor) reading() bool {
	for _, run := range a.runs {
		if !run.terminated {
			return true
		}
	}
	return false
}

// revokingReport lists every shard being given up: REVOKING while its read
// loop runs, DRAINING while records are in flight, REVOKED with inFlight 0
// once let go.
func (a *memberActor) revokingReport() []protocol.RevokingShard {
	out := []protocol.RevokingShard{}
	for _, s := range slices.Sorted(maps.Keys(a.revoking)) {
		rv := a.revoking[s]
		r := protocol.RevokingShard{Shard: protocol.Shard{ShardIndex: s}}
		switch {
		case rv.released:
			at := rv.releasedAt
			r.State, r.AckedAt = protocol.RevokeRevoked, &at
		case rv.drained:
			r.State = protocol.RevokeDraining // waits for its cohort
		case rv.run != nil && !rv.run.terminated:
			r.State, r.InFlight = protocol.RevokeRevoking, rv.run.inFlight()
		default:
			r.State = protocol.RevokeDraining
			if rv.run != nil {
				r.InFlight = rv.run.inFlight()
			}
		}
		out = append(out, r)
	}
	return out
}

// apply carries out an OK, SYNC_METADATA or REVOKE_PENDING (rule 4):
// revoke, own, start, in that order.
func (a *memberActor) apply(status protocol.Status, p plan, sentAt time.Duration) {
	if len(p.Start) > 0 || len(p.Revoke) > 0 {
		a.log.Info("assignment changed", slog.String("status", string(status)), slog.Int64("epoch", a.epoch),
			slog.Any("added", p.Start), slog.Any("lost", p.Revoke), slog.Any("owned", p.Own))
	}
	// 1. Stop reads on lost shards at once; they drain in the background.
	a.revokeSet(p.Revoke, sentAt, ReasonRevoked)
	// 2. Own exactly what the answer says.
	a.owned = p.Own
	if status == protocol.StatusOK {
		// A shard given back while it was still being revoked is owned
		// again: the revocation is dropped, and a new run starts once
		// the old one has drained (rule 6).
		for _, s := range p.Start {
			a.dropRevocation(s)
		}
		if a.suspended && a.core.lease.valid() {
			a.suspended, a.resumed = false, true
			a.log.Info("lease renewed by an OK: reads resume")
		}
	}
	// 3. Start what is owned and not read yet.
	a.ensureRuns()
}

// revokeSet gives up shards as one cohort (see cohort).
func (a *memberActor) revokeSet(shards []int, sentAt time.Duration, reason Reason) {
	if len(shards) == 0 {
		return
	}
	if len(a.revoking) == 0 {
		// The coordinator's rebalance deadline for this member starts
		// with its first revocation and holds until the member has let go
		// of everything outside its target; a revocation while others are
		// still open does not move it.
		a.revokingSince = sentAt
	}
	c := &cohort{shards: slices.Clone(shards), waiting: len(shards), reason: reason}
	for _, s := range shards {
		a.revoke(s, sentAt, c)
	}
}

// dropRevocation forgets the revocation of a shard owned again: its
// cohort no longer waits for it.
func (a *memberActor) dropRevocation(s int) {
	rv := a.revoking[s]
	if rv == nil {
		return
	}
	delete(a.revoking, s)
	c := rv.cohort
	if c == nil || rv.released {
		return
	}
	c.shards = slices.DeleteFunc(c.shards, func(x int) bool { return x == s })
	if !rv.drained {
		c.waiting--
		if c.waiting == 0 && len(c.shards) > 0 {
			a.finishCohort(c)
		}
	}
}

// revoke gives up shard s (rule 5): its reads stop now, its records in
// flight may finish (until the drain deadline) and it is reported until
// REVOKED.
func (a *memberActor) revoke(s int, sentAt time.Duration, c *cohort) {
	rv := &revocation{cohort: c}
	a.revoking[s] = rv
	run := a.runs[s]
	if run == nil {
		a.release(s, rv)
		return
	}
	rv.run = run
	a.stopRun(run, nil)
	// The coordinator fences a member that holds a shard past its
	// rebalance deadline, counted from when it decided the member's first
	// open revocation (after that request was sent); letting go at 90% of
	// it, counted from that send, keeps the member unfenced.
	deadline := min(sentAt, a.revokingSince) + a.rebalance*9/10
	if a.leaving {
		deadline = min(deadline, a.leaveAt)
	}
	stopTimer(&run.drainTimer)
	run.drainAt = deadline
	run.drainTimer = a.timer(deadline-a.core.lease.now(), &drainDeadlineMsg{run: run, at: deadline})
}

// stopRun stops a run's reads: gracefully (fenceErr nil: queued records
// are still handled) or at once (the ACK gate closes with fenceErr).
func (a *memberActor) stopRun(run *shardRun, fenceErr error) {
	if fenceErr != nil {
		run.fence(fenceErr)
	} else {
		run.beginStop()
	}
	if !run.stopSent {
		run.stopSent = true
		a.actx.Stop(run.pid)
	}
}

// settle ends a run whose read loop returned and that has nothing in
// flight (or was fenced): it releases the shard if it was being revoked
// and lets a new run of it start (rule 6).
func (a *memberActor) settle(run *shardRun) {
	if a.runs[run.shard] != run || !run.terminated || !run.drained() {
		return
	}
	delete(a.runs, run.shard)
	stopTimer(&run.drainTimer)
	run.closeGate(ErrRevoked)
	run.cancelHandlers() // none is running; this frees the context
	if rv := a.revoking[run.shard]; rv != nil && rv.run == run && !rv.drained {
		a.release(run.shard, rv)
	}
	a.ensureRuns()
	a.maybeLeave()
}

// release marks a revoked shard let go; once its whole cohort is, they
// are reported soon.
func (a *memberActor) release(s int, rv *revocation) {
	rv.drained = true
	if rv.run != nil {
		rv.run.closeGate(ErrRevoked)
	}
	a.log.Debug("shard drained", slog.Int("shard", s))
	if c := rv.cohort; c != nil {
		c.waiting--
		if c.waiting > 0 {
			return
		}
		a.finishCohort(c)
		return
	}
	a.finishCohort(&cohort{shards: []int{s}, reason: ReasonRevoked})
}

// finishCohort calls OnRevoked once for a cohort whose shards all
// drained, then marks them released (REVOKED) and reports them soon.
func (a *memberActor) finishCohort(c *cohort) {
	now := time.Now().UTC()
	var told []int
	for _, s := range c.shards {
		if a.notified[s] {
			delete(a.notified, s)
			told = append(told, s)
		}
	}
	a.rs.hooks.revoked(a.core.ctx, told, c.reason)
	for _, s := range c.shards {
		if rv := a.revoking[s]; rv != nil && rv.cohort == c {
			rv.released, rv.releasedAt = true, now
		}
	}
	a.log.Debug("shards released", slog.Any("shards", c.shards), slog.String("reason", string(c.reason)))
	a.beatSoon()
}

// ensureRuns starts a run for every owned shard without one: never while
// the lease is expired (rule 9) and never beside a live run (rule 6).
func (a *memberActor) ensureRuns() {
	if a.suspended || a.leaving || a.stopped || a.done || a.epoch <= 0 {
		return
	}
	var start, fresh []int
	for _, s := range a.owned {
		if a.runs[s] == nil {
			start = append(start, s)
			if !a.notified[s] {
				fresh = append(fresh, s)
			}
		}
	}
	if len(start) == 0 {
		return
	}
	reason := ReasonAssigned
	if a.resumed {
		reason = ReasonResumed
	}
	a.resumed = false
	a.rs.hooks.assigned(a.core.ctx, fresh, reason)
	for _, s := range fresh {
		a.notified[s] = true
	}
	for _, s := range start {
		run := newShardRun(a.core, s, a.ownerEpochs[s])
		props := actor.PropsFromProducer(func() actor.Actor { return &shardActor{run: run} })
		run.pid = a.actx.SpawnPrefix(props, "shard-"+strconv.Itoa(s)+"-")
		a.runs[s] = run
		a.byPID[run.pid.Id] = run
	}
	a.log.Debug("reading shards", slog.Any("shards", start))
}

// fenceAll stops reads and ACKs of every run at once (rules 8 and 9) and
// calls OnRevoked for every shard the application was told about.
func (a *memberActor) fenceAll(err error) {
	for _, run := range a.runs {
		a.stopRun(run, err)
		stopTimer(&run.drainTimer)
	}
	if len(a.notified) > 0 {
		shards := slices.Sorted(maps.Keys(a.notified))
		clear(a.notified)
		reason := ReasonLeaving
		switch {
		case errors.Is(err, ErrFenced):
			reason = ReasonFenced
		case errors.Is(err, ErrLeaseExpired):
			reason = ReasonLeaseLost
		case a.giveBack:
			reason = ReasonRedisFailed
		}
		a.rs.hooks.revoked(a.core.ctx, shards, reason)
	}
}

// drainDeadline abandons a revoked run still draining at its deadline: its
// handlers' contexts are cancelled and their ACKs fail from now on.
func (a *memberActor) drainDeadline(run *shardRun) {
	if a.runs[run.shard] != run || run.drained() {
		return
	}
	a.log.Warn("drain deadline passed: abandoning in-flight records (they stay pending)",
		slog.Int("shard", run.shard), slog.Int("inFlight", run.inFlight()))
	a.stopRun(run, ErrRevoked)
	a.settle(run)
}
