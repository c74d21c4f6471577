package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// Timing of the heartbeat loop that is not taken from the coordinator.
const (
	// errBackoffMin and errBackoffMax bound the wait before retrying a
	// heartbeat that failed (network error, non-200 answer); the lease
	// keeps running meanwhile.
	errBackoffMin = 100 * time.Millisecond
	errBackoffMax = time.Second
	// soonDelay coalesces the heartbeats asked for by several shards
	// released at about the same time.
	soonDelay = 5 * time.Millisecond
	// workerStopWait bounds how long a stopping member waits for handlers
	// that ignore their cancelled context.
	workerStopWait = 10 * time.Second
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

// memberActor is one logical member (doc.go rule 1): it alone owns the
// member's epoch, ownership and heartbeat loop, and it spawns one shard
// actor per run. protoactor calls Receive for one message at a time, so
// nothing here locks. The rule numbers in comments below are doc.go's.
type memberActor struct {
	rs   *runState
	id   string
	inc  *incarnations
	core *memberCore
	log  *slog.Logger
	self *actor.PID
	// actx is the context of the message being handled.
	actx actor.Context

	epoch, version int64
	// retryID is the requestId of a heartbeat whose answer was lost to a
	// transport error: the next heartbeat reuses it, so the coordinator
	// can tell a retry from a new request.
	retryID string
	// ownerEpochs are the ownership tokens of the assigned shards, from
	// the last OK (docs/protocol.md, ownership tokens).
	ownerEpochs map[int]int64
	// lastView is the last answer's status and shard sets (answerView):
	// an answer that differs brought news, and the next heartbeat follows
	// at once (nextBeat).
	lastView string
	// catchingUp: the heartbeat in flight was sent at once because the
	// answer before it was behind (nextBeat).
	catchingUp bool
	// hbHeld: the heartbeat in flight asked the coordinator to hold its
	// answer (waitMs); hbReqCancel cancels it when something must be
	// reported sooner.
	hbHeld      bool
	hbReqCancel context.CancelFunc
	// owned is what the member owns and reports in ownedShards, sorted.
	owned    []int
	runs     map[int]*shardRun    // the live run of each shard
	byPID    map[string]*shardRun // the same runs by shard actor id
	revoking map[int]*revocation
	// notified are shards OnAssigned was called for and OnRevoked not yet.
	notified map[int]bool
	// suspended: the lease expired; reads stay stopped until an OK.
	suspended bool
	// resumed: an OK ended a suspension; the next OnAssigned says so.
	resumed bool
	// revokingSince is when the heartbeat that opened the current
	// revocations was sent (revokeSet): every drain deadline counts from
	// it, as the coordinator's rebalance deadline does.
	revokingSince time.Duration
	// rejoinAt: after a fence with handlers still running, no join
	// (epoch 0) is sent before this time on the lease clock (rejoin).
	rejoinAt time.Duration
	// rejoinWait: a join heartbeat (epoch 0) waits for the read loops of
	// the runs a fence stopped to return (see beat).
	rejoinWait bool

	interval, rebalance time.Duration
	errBackoff          time.Duration
	failures            int
	rejoins             int

	hbBusy, beatAgain bool
	hbCtx             context.Context
	hbCancel          context.CancelFunc
	hbWG              sync.WaitGroup
	beatTimer         *time.Timer
	beatDue           time.Duration // when beatTimer fires, on the lease clock
	leaseTimer        *time.Timer
	leaveTimer        *time.Timer

	leaving, leaveSent, leaveExpired bool
	leaveAt                          time.Duration
	done, stopped                    bool

	// For Status: when the last successful answer arrived, RETRYs in a
	// row, why the member is not active, and the error that stopped it.
	lastOK  time.Time
	retries int
	reason  string
	fatal   error

	// Redis first (redisfirst.go): redisDown keeps the member from
	// joining until a PING succeeds; giveBack marks a leave that gives the
	// shards back after read failures (the member rejoins afterwards);
	// exitWanted: Run asked the member to leave for good.
	redisDown, probeBusy, giveBack, exitWanted bool
	redisFailures                              int
	redisBackoff                               time.Duration
	redisTimer                                 *time.Timer
}

// incarnations is what one member's actor incarnations pass on: protoactor
// restarts a member actor that panicked with a new memberActor from the
// same producer, and the new one must not join while handlers of the old
// one may still be running.
type incarnations struct {
	// joinNotBefore: no join (epoch 0) before this time (monotonic), set by
	// an incarnation that stopped with handlers still running to the end
	// of its lease (shutdown).
	joinNotBefore time.Time
	// seq numbers the member's requests (requestId) across incarnations:
	// an incarnation counting from 1 again would send the requestIds of
	// the one before, and the coordinator takes a requestId it has seen
	// for a retry (its first join's: a late copy, answered RETRY).
	seq int64
}

func newMemberActor(rs *runState, id string) actor.Producer {
	inc := &incarnations{}
	return func() actor.Actor {
		return &memberActor{rs: rs, id: id, inc: inc}
	}
}

// Receive handles one message.
func (a *memberActor) Receive(ctx actor.Context) {
	a.actx = ctx
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *actor.Stopping:
		a.shutdown()
	case *actor.Restarting:
		a.rs.cfg.log.Error("member actor failed; restarting it: it stops everything and rejoins", slog.String("member", a.id))
		a.shutdown()
	case *beatMsg:
		// Timers are never set to nil when they fire: a stale message
		// from a replaced timer must not make shutdown miss the new one.
		a.beat()
	case *answerMsg:
		a.onAnswer(m)
	case *leaseCheckMsg:
		a.checkLease()
	case *runIdleMsg:
		a.settle(m.run)
	case *actor.Terminated:
		if run := a.byPID[m.Who.Id]; run != nil {
			delete(a.byPID, m.Who.Id)
			run.terminated = true
			a.settle(run)
			if a.rejoinWait && !a.reading() {
				a.rejoinWait = false
				a.beat()
			}
		}
	case *drainDeadlineMsg:
		if m.at == m.run.drainAt {
			a.drainDeadline(m.run)
		}
	case *leaveMsg:
		a.exitWanted = true
		a.beginLeave()
	case *redisProbeMsg:
		a.onRedisProbe(m)
	case *redisRetryMsg:
		a.probeRedis()
	case *readFailedMsg:
		a.onReadFailed(m)
	case *leaveDeadlineMsg:
		a.leaveDeadline()
	}
	a.publish()
}

// publish puts the member's state on the Runtime's board (Status).
func (a *memberActor) publish() {
	if a.core == nil {
		return
	}
	st := MemberStatus{MemberID: a.id, Epoch: max(a.epoch, 0), Owned: slices.Clone(a.owned),
		LastHeartbeat: a.lastOK, Failures: a.failures + a.retries, Reason: a.reason, Err: a.fatal}
	switch {
	case a.done && a.fatal != nil:
		st.State = StateFailed
	case a.done || a.stopped:
		st.State = StateStopped
	case a.leaving && !a.giveBack:
		st.State = StateLeaving
	case a.redisDown || a.giveBack:
		st.State = StateRedisDown
	case a.suspended:
		st.State = StateSuspended
	case a.epoch <= 0 && a.rejoins > 0:
		st.State = StateRejoining
	case a.epoch <= 0:
		st.State = StateStarting
	default:
		st.State, st.Reason = StateActive, ""
	}
	a.rs.board.set(st)
}

// start sets the member up and sends its join heartbeat.
func (a *memberActor) start(ctx actor.Context) {
	cfg := a.rs.cfg
	a.self = ctx.Self()
	a.log = cfg.log.With(slog.String("member", a.id))
	take := 1 // a Handler gets one record per turn, a BatchHandler all queued
	if a.rs.batch != nil {
		take = 0
	}
	core := &memberCore{
		id: a.id, cfg: cfg, handler: a.rs.handler, batch: a.rs.batch, rdb: cfg.rdb, acker: a.rs.acker,
		log: a.log, lease: newLeaseClock(cfg.memberLease), sched: newScheduler(cfg.maxWorkers, take),
		hooks: a.rs.hooks, stats: a.rs.stats,
	}
	root, self := a.rs.system.Root, a.self
	core.send = func(msg any) { root.Send(self, msg) }
	core.ctx, core.cancel = context.WithCancel(withMemberID(context.Background(), a.id))
	a.core = core
	a.runs, a.byPID = map[int]*shardRun{}, map[string]*shardRun{}
	a.revoking, a.notified = map[int]*revocation{}, map[int]bool{}
	a.ownerEpochs = map[int]int64{}
	a.owned = []int{}
	a.interval, a.rebalance = a.capInterval(protocol.DefaultHeartbeatInterval), protocol.DefaultRebalanceTimeout
	a.hbCtx, a.hbCancel = context.WithCancel(context.Background())
	core.sched.start(core.handle)
	a.log.Info("member starting", slog.Int("workers", cfg.maxWorkers), slog.Duration("memberLease", cfg.memberLease))
	if wait := time.Until(a.inc.joinNotBefore); wait > 0 {
		// Rule 8, after a restart: the join frees the shards of the
		// incarnation before, some of whose handlers still run.
		a.log.Info("join waits for the lease of the incarnation before: its handlers still run", slog.Duration("wait", wait))
		a.rejoinAt = core.lease.now() + wait
	}
	// Rule 14: join only with a Redis that answers.
	a.waitForRedis("checking Redis before joining")
}

// shutdown stops everything the member owns, in order:
//
//  1. timers, so that nothing schedules more work;
//  2. every run: ACK gates closed, handlers' contexts cancelled, shard
//     actors told to stop (protoactor stops and waits for them after this
//     returns; each waits for its read loop);
//  3. the heartbeat in flight, cancelled and waited for;
//  4. the workers, after their current record, waited for at most
//     workerStopWait; when some are still running then, the next
//     incarnation (a restart after a panic) joins only after the lease of
//     the last answer, as a rejoin after a fence does (rule 8);
//  5. the member's context and lease.
func (a *memberActor) shutdown() {
	if a.stopped || a.core == nil {
		return
	}
	a.stopped = true
	leaseEnd := time.Now().Add(a.core.lease.until())
	stopTimer(&a.beatTimer)
	stopTimer(&a.leaseTimer)
	stopTimer(&a.leaveTimer)
	stopTimer(&a.redisTimer)
	a.fenceAll(ErrRevoked)
	a.hbCancel()
	a.hbWG.Wait()
	a.core.sched.close()
	if !a.core.sched.wait(workerStopWait) {
		a.log.Error("handlers ignored their cancelled context; leaving their workers behind",
			slog.Duration("waited", workerStopWait))
		// They may still work on records of shards this member's next
		// join frees at once (the same instanceId): the coordinator
		// would wait for this lease before giving them to a member it
		// could not tell from a new process, so the next incarnation
		// does too.
		a.inc.joinNotBefore = leaseEnd
	}
	a.core.cancel()
	a.core.lease.drop()
}

// beat sends a heartbeat now, or right after the one in flight (rule 2).
//
// A join (epoch 0) of a member that was reading waits until every read
// loop has returned (rule 8): the join tells the coordinator the member
// owns nothing, and it may grant the shards to another member at once
// (docs/protocol.md §9.1), while a blocking XREADGROUP issued before the
// fence would still take that shard's new records into this consumer's
// pending list. The wait is short: the shard actors interrupt blocking
// reads (readConn); only without a read connection is it up to one read,
// WithBlock or the lease left when it was issued, whichever is shorter.
func (a *memberActor) beat() {
	if a.stopped || a.done || a.leaveSent || a.redisDown {
		return
	}
	if a.hbBusy {
		a.beatAgain = true
		return
	}
	if wait := a.rejoinAt - a.core.lease.now(); a.epoch == protocol.EpochJoin && wait > 0 {
		stopTimer(&a.beatTimer)
		a.after(wait)
		return
	}
	if a.epoch == protocol.EpochJoin && a.reading() {
		if !a.rejoinWait {
			a.log.Debug("rejoin waits for the read loops to return", slog.Int("runs", len(a.runs)))
		}
		a.rejoinWait = true
		stopTimer(&a.beatTimer)
		return
	}
	stopTimer(&a.beatTimer)
	a.send(a.request(), false)
}

// beatSoon heartbeats after soonDelay: something the coordinator is
// waiting for (a released shard) is ready to report. A held heartbeat in
// flight is cancelled so that the report does not wait for its answer (the
// coordinator recorded it on arrival; only its answer is lost).
func (a *memberActor) beatSoon() {
	if a.hbBusy {
		a.beatAgain = true
		if a.hbHeld && a.hbReqCancel != nil {
			a.hbReqCancel()
		}
		return
	}
	a.after(soonDelay)
}

// after schedules the next heartbeat in d, unless one is already due
// sooner (a released shard asked for a heartbeat while an answer was being
// applied: the interval of that answer must not delay it).
func (a *memberActor) after(d time.Duration) {
	if a.stopped || a.done || a.leaveSent {
		return
	}
	now := a.core.lease.now()
	due := now + max(d, 0)
	if a.beatTimer != nil && a.beatDue > now && a.beatDue <= due {
		return
	}
	stopTimer(&a.beatTimer)
	a.beatDue = due
	a.beatTimer = a.timer(d, &beatMsg{})
}

// timer delivers msg to the actor after d.
func (a *memberActor) timer(d time.Duration, msg any) *time.Timer {
	root, self := a.rs.system.Root, a.self
	return time.AfterFunc(max(d, 0), func() { root.Send(self, msg) })
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// request builds the next heartbeat from the member's state.
func (a *memberActor) request() protocol.HeartbeatRequest {
	a.inc.seq++
	cfg := a.rs.cfg
	requestID := a.id + "-" + a.rs.nonce + "-" + strconv.FormatInt(a.inc.seq, 10)
	if a.retryID != "" {
		requestID, a.retryID = a.retryID, ""
	}
	progress := []protocol.ShardProgress{}
	for _, s := range a.owned {
		// Only owned shards: progress on any other shard is outside the
		// member's authority and gets it fenced (docs/protocol.md §6.1 step 6).
		if run := a.runs[s]; run != nil {
			progress = append(progress, run.progress())
		}
	}
	return protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion,
		RequestID:       requestID,
		InstanceID:      a.rs.instanceID,
		RequestSeq:      a.rs.requestSeq.Add(1),
		WaitMs:          a.waitMs(),
		MemberID:        a.id,
		MemberName:      cfg.memberName,
		MemberEpoch:     a.epoch,
		MetadataVersion: a.version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{
			RuntimeMaxConcurrency: cfg.maxWorkers,
			AvailableConcurrency:  max(a.core.sched.available(), 0),
		},
		OwnedShards:    protocol.Shards(a.owned),
		RevokingShards: a.revokingReport(),
		ShardProgress:  progress,
	}
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

// waitMs is how long the coordinator may hold the next answer
// (docs/protocol.md, held heartbeats): the heartbeat interval, but only for
// a steady member — joined, not leaving, nothing being revoked, lease not
// suspended — so that reports the coordinator waits for are never held
// behind an answer, and 0 otherwise. A coordinator that ignores it answers
// at once, and the member then waits the interval itself.
func (a *memberActor) waitMs() int64 {
	// After a RETRY the lease was not renewed: the answer of a coordinator
	// that decides again (the new owner after a failover) must come at
	// once, not a wait later with the lease running out.
	if a.epoch <= 0 || a.leaving || a.suspended || len(a.revoking) > 0 || a.failures > 0 || a.retries > 0 {
		return 0
	}
	return a.interval.Milliseconds()
}

// send posts req on a goroutine owned by the actor (waited for in
// shutdown); the answer comes back as an answerMsg.
func (a *memberActor) send(req protocol.HeartbeatRequest, leave bool) {
	a.hbBusy = true
	sentAt, sentWall := a.core.lease.stamp()
	timeout := a.rs.requestTimeout
	if leave {
		timeout = max(min(timeout, a.leaveAt-sentAt), 200*time.Millisecond)
	}
	// A held answer may come waitMs late: the bound covers that too.
	timeout += time.Duration(req.WaitMs) * time.Millisecond
	root, self, client, core := a.rs.system.Root, a.self, a.rs.client, a.core
	prefix, group := a.rs.cfg.stream, a.rs.cfg.group
	ctx, cancel := context.WithTimeout(a.hbCtx, timeout)
	a.hbHeld, a.hbReqCancel = req.WaitMs > 0, cancel
	a.hbWG.Add(1)
	go func() {
		defer a.hbWG.Done()
		resp, err := client.Heartbeat(ctx, prefix, group, &req)
		if err != nil {
			err = fmt.Errorf("heartbeat %s: %w", req.MemberID, err)
		}
		cancel()
		root.Send(self, &answerMsg{core: core, req: req, resp: resp, err: err, sentAt: sentAt, sentWall: sentWall, leave: leave})
	}()
}

// onAnswer applies one heartbeat answer (docs/protocol.md §6's status table).
func (a *memberActor) onAnswer(m *answerMsg) {
	if m.core != a.core {
		return // sent by an earlier incarnation of this actor
	}
	a.hbBusy, a.hbHeld, a.hbReqCancel = false, false, nil
	if a.stopped {
		return
	}
	if m.leave {
		a.onLeaveAnswer(m)
		return
	}
	defer a.afterAnswer()
	if m.err != nil && m.req.WaitMs > 0 && errors.Is(m.err, context.Canceled) && a.hbCtx.Err() == nil {
		// A held heartbeat cancelled because something must be reported
		// now (beatSoon): the coordinator recorded it; beatAgain sends
		// the report. Not a failure.
		return
	}
	a.heartbeatHook(m)
	if err := checkAnswer(m); err != nil {
		if aerr := authError(a.rs.cfg.stream, a.rs.cfg.group, m.err); aerr != nil {
			a.fail(aerr)
			return
		}
		var coordErr *coordclient.Error
		if m.err != nil && !errors.As(m.err, &coordErr) {
			// The request may have reached the coordinator and only its
			// answer been lost: the retry carries the same requestId.
			a.retryID = m.req.RequestID
		}
		a.failures++
		a.errBackoff = min(max(a.errBackoff*2, errBackoffMin), errBackoffMax, a.interval)
		a.reason = "heartbeat failed: " + err.Error()
		if a.failures == 1 || a.failures%10 == 0 {
			a.log.Warn("heartbeat failed; retrying (the lease keeps running)", slog.Int("failures", a.failures),
				slog.Duration("leaseLeft", a.core.lease.until()), slog.Any("error", err))
		}
		a.after(jitter(a.errBackoff))
		return
	}
	if a.failures > 0 {
		a.log.Info("heartbeats recovered", slog.Int("failures", a.failures))
	}
	a.failures, a.errBackoff = 0, 0
	resp := m.resp
	a.takeLease(resp)
	a.takeTiming(resp)
	view := answerView(resp)
	news := view != a.lastView
	a.lastView = view
	assigned := sanitizeShards(resp.Assignment.AssignedShards)
	p := planFor(resp.Status, a.owned, assigned)
	cfg := a.rs.cfg
	switch {
	case p.Fatal:
		a.fail(&ProtocolError{Stream: cfg.stream, Group: cfg.group, MemberID: a.id, Status: string(resp.Status),
			Version: protocol.CurrentVersion, Message: resp.Message})
		return
	case p.Rejoin && resp.ErrorCode == protocol.CodeStreamNotFound:
		// Told apart from an unknown member by the coordinator: a
		// rejoin can never succeed.
		a.fail(&StreamNotFoundError{Stream: cfg.stream, Group: cfg.group, Message: resp.Message})
		return
	case p.Rejoin && resp.ErrorCode == protocol.CodeGroupNotFound:
		a.fail(&GroupNotFoundError{Stream: cfg.stream, Group: cfg.group, Message: resp.Message})
		return
	case p.Rejoin:
		a.rejoin(resp.Status)
		return
	case !p.Known:
		a.log.Warn("unknown heartbeat status; treated as RETRY", slog.String("status", string(resp.Status)))
		a.after(jitter(a.interval))
		return
	case !p.Renew: // RETRY
		a.onRetry(resp)
		return
	}
	a.rejoins, a.retries, a.reason = 0, 0, ""
	a.lastOK = time.Now()
	// Ignore epochs that are not positive (rule 3): only a leave answers
	// -1, and sending one back would be read as a leave (franz-go's
	// handleResp does the same).
	if resp.MemberEpoch > 0 {
		a.epoch = resp.MemberEpoch
	} else {
		a.log.Warn("ignoring a non-positive member epoch in the answer", slog.Int64("epoch", resp.MemberEpoch))
	}
	if resp.MetadataVersion >= 0 {
		a.version = resp.MetadataVersion
	}
	if !a.suspended && a.core.lease.lapsed() {
		// Rule 9: the lease ended before this answer renews it (the
		// answer came or was applied late; the wall clock stepped
		// forward), and reads, hand-overs and ACKs were refused
		// meanwhile, leaving their records in this consumer's pending
		// list. A lapse the lease check has not seen yet is still a
		// lapse: stop every run now; an OK resumes at once (apply) with
		// new runs, which read the member's own pending entries first
		// (rule 7) instead of leaving them to XAUTOCLAIM.
		a.suspend("assignment lease lapsed before an answer renewed it: reads and ACKs stopped on every shard until an OK")
	}
	a.scheduleLease(a.core.lease.renew(m.sentAt, m.sentWall))
	a.forgetReported(m.req)
	if resp.Status == protocol.StatusOK {
		clear(a.ownerEpochs)
		for _, s := range resp.Assignment.AssignedShards {
			if s.OwnerEpoch > 0 {
				a.ownerEpochs[s.ShardIndex] = s.OwnerEpoch
			}
		}
	}
	if !a.leaving {
		a.apply(resp.Status, p, m.sentAt)
	}
	// When to heartbeat next (nextBeat): at once only for news to act on
	// or report, or to be parked again; a new epoch alone waits.
	next, catchUp := nextBeat(answerFacts{
		News: news || len(p.Start) > 0 || len(p.Revoke) > 0, Asked: time.Duration(m.req.WaitMs) * time.Millisecond,
		Took: a.core.lease.now() - m.sentAt, Behind: resp.MemberEpoch != m.req.MemberEpoch || resp.MetadataVersion != m.req.MetadataVersion,
		CaughtUp: a.catchingUp, Steady: a.waitMs() > 0, Interval: a.interval,
	})
	a.catchingUp = catchUp
	a.after(next)
}

// heartbeatHook tells OnHeartbeat how a heartbeat went.
func (a *memberActor) heartbeatHook(m *answerMsg) {
	e := HeartbeatEvent{MemberID: a.id, Latency: a.core.lease.now() - m.sentAt, Err: checkAnswer(m)}
	if e.Err == nil {
		e.Status, e.ErrorCode, e.Epoch = string(m.resp.Status), string(m.resp.ErrorCode), m.resp.MemberEpoch
		e.Assigned = sanitizeShards(m.resp.Assignment.AssignedShards)
		e.Pending = sanitizeShards(m.resp.Assignment.PendingShards)
	}
	a.rs.hooks.heartbeat(a.core.ctx, e)
}

// onRetry handles a RETRY: keep everything, heartbeat again after the
// answered interval (plus jitter, so that members refused together do not
// come back together). It may heal, so it is a WARN with the reason, not
// an error: another live process holding the member id, a full group, or
// a coordinator that cannot decide now (store down, shutting down,
// overloaded).
func (a *memberActor) onRetry(resp protocol.HeartbeatResponse) {
	a.retries++
	var reason string
	switch resp.ErrorCode {
	case protocol.CodeMemberIDInUse:
		reason = "another process is using this member id (check WithBaseID / POD_NAME): " + resp.Message
	case "":
		reason = "the coordinator cannot decide now (store unavailable, shutting down or overloaded)"
	default:
		reason = string(resp.ErrorCode) + ": " + resp.Message
	}
	a.reason = "coordinator answered RETRY: " + reason
	if a.retries == 1 || a.retries%10 == 0 {
		a.log.Warn("coordinator answered RETRY; heartbeating again", slog.String("reason", reason),
			slog.String("errorCode", string(resp.ErrorCode)), slog.Int("retries", a.retries),
			slog.Duration("leaseLeft", a.core.lease.until()))
	} else {
		a.log.Debug("coordinator answered RETRY", slog.String("reason", reason))
	}
	a.after(jitter(a.interval))
}

// jitter adds up to a tenth of d, at random.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + rand.N(d/10+1)
}

// afterAnswer runs what waited for the heartbeat in flight.
func (a *memberActor) afterAnswer() {
	a.maybeLeave()
	if a.beatAgain {
		a.beatAgain = false
		a.beat()
	}
}

// takeLease adopts the coordinator's member lease when it is shorter than
// the member's own (docs/protocol.md, memberLeaseMs): the member must never
// believe it may read after the coordinator stopped counting it as a
// reader. A difference is logged once per Runtime.
func (a *memberActor) takeLease(resp protocol.HeartbeatResponse) {
	if resp.MemberLeaseMs <= 0 {
		return
	}
	theirs := time.Duration(resp.MemberLeaseMs) * time.Millisecond
	own := a.rs.cfg.memberLease
	if theirs != own && a.rs.leaseWarned.CompareAndSwap(false, true) {
		a.log.Warn("the coordinator's member lease differs from WithMemberLease; using the shorter",
			slog.Duration("coordinator", theirs), slog.Duration("own", own), slog.Duration("used", min(own, theirs)))
	}
	a.core.lease.setLength(min(own, theirs))
}

// checkAnswer rejects answers that are not answers to req.
func checkAnswer(m *answerMsg) error {
	if m.err != nil {
		return m.err
	}
	if m.resp.ResponseTo != m.req.RequestID {
		return fmt.Errorf("answer is for request %q, not %q", m.resp.ResponseTo, m.req.RequestID)
	}
	return nil
}

// takeTiming takes the heartbeat interval and rebalance timeout of an
// answer; values that are not positive keep the protocol defaults.
func (a *memberActor) takeTiming(resp protocol.HeartbeatResponse) {
	interval := protocol.DefaultHeartbeatInterval
	if resp.HeartbeatIntervalMs > 0 {
		interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
	}
	a.interval = a.capInterval(interval)
	if resp.RebalanceTimeoutMs > 0 {
		a.rebalance = time.Duration(resp.RebalanceTimeoutMs) * time.Millisecond
	}
}

// capInterval caps the heartbeat interval at a third of the member lease:
// a coordinator configured with an interval near its lease would make the
// member fail closed between two heartbeats that both succeed.
func (a *memberActor) capInterval(d time.Duration) time.Duration {
	return min(d, a.core.lease.length()/3)
}

// forgetReported drops the REVOKED reports the coordinator has now seen.
func (a *memberActor) forgetReported(req protocol.HeartbeatRequest) {
	for _, r := range req.RevokingShards {
		if !r.Terminal() {
			continue
		}
		if rv := a.revoking[r.Shard.ShardIndex]; rv != nil && rv.released {
			delete(a.revoking, r.Shard.ShardIndex)
		}
	}
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

// rejoin handles UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH (rule 8): stop
// reads and ACKs at once, clear ownership, send a full heartbeat with
// epoch 0.
func (a *memberActor) rejoin(status protocol.Status) {
	a.log.Warn("coordinator dropped this member: reads and ACKs stopped; rejoining",
		slog.String("status", string(status)), slog.Int64("epoch", a.epoch), slog.Any("owned", a.owned))
	leaseLeft := a.core.lease.until()
	a.core.lease.drop()
	a.fenceAll(ErrFenced)
	// A handler still running (its context is cancelled, but it may not
	// look) is still reading its shard. The join frees this member's shards
	// at once (the same instanceId, docs/protocol.md §9.2), so it waits
	// until the lease of the last answer has passed, as the coordinator
	// would before freeing them to a member it could not tell apart from a
	// new process.
	handling := false
	for _, run := range a.runs {
		handling = handling || run.inFlight() > 0
	}
	// Runs stay in a.runs until their read loops return, so that no new
	// run of a shard starts beside an old one (rule 6).
	a.owned = []int{}
	clear(a.revoking)
	a.epoch, a.version = protocol.EpochJoin, 0
	a.lastView, a.catchingUp = "", false
	a.suspended = false
	a.rejoins++
	if a.leaving {
		a.maybeLeave()
		return
	}
	a.rejoinAt = 0
	if handling && leaseLeft > 0 {
		a.log.Info("rejoin waits for the lease of the last answer: handlers still run", slog.Duration("wait", leaseLeft))
		a.rejoinAt = a.core.lease.now() + leaseLeft
	}
	if a.rejoins == 1 {
		a.after(0)
	} else {
		a.after(a.interval)
	}
}

// scheduleLease checks the lease again at its deadline.
func (a *memberActor) scheduleLease(deadline time.Duration) {
	stopTimer(&a.leaseTimer)
	a.leaseTimer = a.timer(deadline-a.core.lease.now(), &leaseCheckMsg{})
}

// checkLease fails closed when the lease has passed (rule 9): every run
// stops reads and ACKs; ownership is kept and reads resume on a later OK.
func (a *memberActor) checkLease() {
	if a.suspended || a.stopped || a.epoch <= 0 {
		return
	}
	if left := a.core.lease.until(); left > 0 {
		a.leaseTimer = a.timer(left, &leaseCheckMsg{})
		return
	}
	a.suspend("assignment lease expired without a successful heartbeat: reads and ACKs stopped on every shard until an OK")
}

// suspend fails closed on a lapsed lease (rule 9): every run stops reads
// and ACKs at once; ownership is kept and an OK resumes reads.
func (a *memberActor) suspend(msg string) {
	a.suspended = true
	a.log.Warn(msg, slog.Duration("memberLease", a.core.lease.length()), slog.Any("owned", a.owned))
	a.rs.hooks.leaseLost(a.core.ctx)
	a.fenceAll(ErrLeaseExpired)
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

// beginLeave starts the graceful leave (rule 13): stop reads on every
// shard, drain, then (maybeLeave) send memberEpoch -1.
func (a *memberActor) beginLeave() {
	if a.leaving || a.done || a.stopped {
		return
	}
	a.leaving = true
	a.leaveAt = a.core.lease.now() + a.rs.cfg.leaveTimeout
	a.leaveTimer = a.timer(a.rs.cfg.leaveTimeout, &leaveDeadlineMsg{})
	a.log.Info("leaving: stopping reads and draining", slog.Any("owned", a.owned))
	reason := ReasonLeaving
	if a.giveBack {
		reason = ReasonRedisFailed
	}
	a.revokeSet(a.owned, a.core.lease.now(), reason)
	a.owned = []int{}
	a.maybeLeave()
}

// leaveDeadline gives up waiting for the drain: runs still draining are
// abandoned and the leave is sent.
func (a *memberActor) leaveDeadline() {
	if !a.leaving || a.leaveSent {
		return
	}
	a.leaveExpired = true
	if len(a.runs) > 0 {
		a.log.Warn("leave timeout passed: abandoning records still in flight (they stay pending)",
			slog.Int("runs", len(a.runs)))
		a.fenceAll(ErrRevoked)
		for _, s := range slices.Sorted(maps.Keys(a.revoking)) {
			if rv := a.revoking[s]; rv != nil && !rv.drained {
				a.release(s, rv)
			}
		}
	}
	a.maybeLeave()
}

// maybeLeave sends the leave heartbeat once every run has drained (or the
// leave timeout passed), every read loop has returned and no heartbeat is
// in flight.
//
// The read loops are waited for even after the leave timeout: the leave
// reports every shard REVOKED, which frees them at once, while a blocking
// XREADGROUP issued before would still take records written to its shard
// into this consumer's pending list beside the next owner's reads. The
// wait is short, as blocking reads are interrupted (readConn); without a
// read connection it is up to one read (WithBlock, or the lease left when
// it was issued).
func (a *memberActor) maybeLeave() {
	if !a.leaving || a.leaveSent || a.done || a.hbBusy {
		return
	}
	if (len(a.runs) > 0 && !a.leaveExpired) || a.reading() {
		return
	}
	a.leaveSent = true
	stopTimer(&a.beatTimer)
	if a.epoch <= 0 {
		// Never joined, or dropped by the coordinator: nothing to leave.
		// A give-back (Redis failing) is not an exit: the member waits
		// for Redis and joins again, as after a leave that was sent.
		if a.giveBack && !a.exitWanted {
			a.afterGiveBack()
			return
		}
		a.finish(nil)
		return
	}
	req := a.request()
	req.MemberEpoch = protocol.EpochLeave
	req.OwnedShards = []protocol.Shard{}
	req.ShardProgress = []protocol.ShardProgress{}
	for i := range req.RevokingShards {
		// Everything still listed has been let go: drained, or abandoned
		// with its ACK gate closed.
		req.RevokingShards[i].State, req.RevokingShards[i].InFlight = protocol.RevokeRevoked, 0
	}
	a.send(req, true)
}

func (a *memberActor) onLeaveAnswer(m *answerMsg) {
	switch err := checkAnswer(m); {
	case err != nil:
		a.log.Warn("leave heartbeat failed; the coordinator expires this member after its lease", slog.Any("error", err))
	case m.resp.Status != protocol.StatusOK:
		a.log.Warn("leave heartbeat answered", slog.String("status", string(m.resp.Status)))
	default:
		a.log.Info("left the group")
	}
	a.core.lease.drop()
	if a.giveBack && !a.exitWanted {
		a.afterGiveBack()
		return
	}
	a.epoch = protocol.EpochLeave
	a.finish(nil)
}

// fail stops the member at once after an answer it cannot go on from.
func (a *memberActor) fail(err error) {
	a.log.Error("member failed: reads and ACKs stopped", slog.Any("error", err))
	a.fatal, a.reason = err, err.Error()
	a.core.lease.drop()
	a.fenceAll(ErrFenced)
	a.owned = []int{}
	clear(a.revoking)
	a.finish(err)
}

// finish reports to Run, once, that the member is done.
func (a *memberActor) finish(err error) {
	if a.done {
		return
	}
	a.done = true
	stopTimer(&a.beatTimer)
	stopTimer(&a.leaseTimer)
	stopTimer(&a.leaveTimer)
	select {
	case a.rs.exits <- memberExit{id: a.id, err: err}:
	default:
		// Run no longer listens (a restarted incarnation finishing again).
	}
}
