package member

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
)

// workerStopWait bounds how long a stopping member waits for handlers
// that ignore their cancelled context.
const workerStopWait = 10 * time.Second

// workerReturnWait is the least a stopping member waits for its workers,
// even past Run's deadline.
const workerReturnWait = 100 * time.Millisecond

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
	// stopBy: Run's context ended and everything, the stop of the
	// workers included, must be over by then (WithLeaveTimeout).
	stopBy        time.Time
	done, stopped bool

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
		a.onRunEnding(m.by)
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
	core.flusher = newAckFlusher(core, cfg.ackMax, cfg.ackDelay, a.rs.requestTimeout)
	core.flusher.start()
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
//     workerStopWait, and never past stopBy once Run's context ended
//     (WithLeaveTimeout bounds the whole of Run); when some are still
//     running then, they are left behind, and the next incarnation (a
//     restart after a panic) joins only after the lease of the last
//     answer, as a rejoin after a fence does (rule 8);
//  5. the ack flusher (acks still queued are refused: step 2 closed the
//     gates);
//  6. the member's context and lease.
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
	wait := workerStopWait
	if !a.stopBy.IsZero() {
		// Idle workers return at once once closed; the floor lets them,
		// so that a deadline already reached does not report them left
		// behind.
		wait = min(wait, max(time.Until(a.stopBy), workerReturnWait))
	}
	if !a.core.sched.wait(wait) {
		a.log.Error("handlers ignored their cancelled context; leaving their workers behind (they may still be running)",
			slog.Duration("waited", wait))
		// They may still work on records of shards this member's next
		// join frees at once (the same instanceId): the coordinator
		// would wait for this lease before giving them to a member it
		// could not tell from a new process, so the next incarnation
		// does too.
		a.inc.joinNotBefore = leaseEnd
	}
	a.core.flusher.stop()
	a.core.cancel()
	a.core.lease.drop()
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
