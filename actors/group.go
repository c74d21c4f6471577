package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
)

// groupActor owns one consumer group's state. See the package doc for the
// steps it runs per message.
type groupActor struct {
	env          *env
	prefix, name string
	// incarnation names this actor to the observer: a later actor of the
	// same group, a restart's included, has a greater one.
	incarnation uint64
	// initial is the record loaded at start-up or creation; it is used by
	// the first incarnation only, a restarted actor reloads from the store.
	initial *persistence.GroupRecord
	// coolDown, when positive, is how long the first incarnation fails
	// closed before it loads the group (newCoolingGroupActor).
	coolDown time.Duration

	g        *assign.Group
	revision uint64
	// failed is set when the group cannot be loaded or written: it then
	// fails closed until an operator repairs the store.
	failed  error
	deleted bool

	// dirty is set while the state holds changes not yet written; held
	// are the heartbeat answers waiting for that write (group commit: one
	// synced write for every heartbeat already queued, see flush).
	dirty bool
	// changes names what the unwritten steps changed, so that flush writes
	// only those parts of the group.
	changes     persistence.Changes
	held        []heldAnswer
	flushQueued bool
	// wakeDue and auditDue are work that follows the pending write instead
	// of preceding it: looking through the parked answers for news (wake)
	// and the periodic audit of the whole group. Neither changes an answer
	// already decided, and both grow with the group, so the answers waiting
	// for the write (a join's, a leave's) do not wait for them too.
	wakeDue, auditDue bool
	// parked are the held heartbeats (waitMs) by member id, waiting for
	// news or for their wait to end; see held.go.
	parked  map[string]*parkedAnswer
	parkSeq uint64
	waits   heldWaits

	self    *actor.PID
	timer   *time.Timer
	timerAt time.Time
	// mark is the group's epochs and version after the last step, and
	// regressions the steps that moved one of them back (an invariant
	// violation: they only ever grow), newest last, at most maxRegressions.
	mark        epochMark
	regressions []string
	// violations is what the last invariant audit found, and auditedAt
	// when it ran (see audit).
	violations int
	auditedAt  time.Time
	// rebalanceStart is when the target last changed while the group was
	// converged; zero while converged. For the rebalance duration metric.
	rebalanceStart time.Time
	// live is what this actor publishes for scrapes (see live.go).
	live *liveGroup
	// origins is where each member's last heartbeat came from
	// (origin.go). Not durable: shown once a member heartbeats here.
	origins map[string]Origin
	// hold is a forced offsets reset's hold on shards (offsethold.go), or
	// nil. Not durable.
	hold *shardHold
}

// epochMark is what must never go back between two steps of a group.
type epochMark struct{ group, assignment, version int64 }

// maxRegressions bounds the epoch regressions a group actor remembers.
const maxRegressions = 20

// checkEpochs records a step that moved the group epoch, assignment epoch
// or metadata version back. A restored group starts a new mark: restoring
// an older snapshot is the store going back, which metadata correction
// handles, not a regression of the state machine.
func (a *groupActor) checkEpochs(kind string) {
	now := epochMark{a.g.GroupEpoch, a.g.AssignmentEpoch, a.g.MetadataVersion}
	before := a.mark
	a.mark = now
	if kind == StepRestore {
		return
	}
	if now.group < before.group || now.assignment < before.assignment || now.version < before.version {
		msg := fmt.Sprintf("epoch regression in a %s step: group %d→%d, assignment %d→%d, metadata version %d→%d",
			kind, before.group, now.group, before.assignment, now.assignment, before.version, now.version)
		a.log().Error("invariant violated", slog.String("violation", msg))
		a.regressions = append(a.regressions, msg)
		if len(a.regressions) > maxRegressions {
			a.regressions = a.regressions[1:]
		}
		a.publishState()
	}
}

// heldAnswer is a heartbeat answer waiting for the group's changes to be
// durable.
type heldAnswer struct {
	to   answerTo
	req  *protocol.HeartbeatRequest
	resp protocol.HeartbeatResponse
}

func newGroupActor(e *env, prefix, name string, initial *persistence.GroupRecord) actor.Producer {
	return func() actor.Actor {
		a := &groupActor{env: e, prefix: prefix, name: name, initial: initial, incarnation: e.incarnations.Add(1)}
		// Only the first incarnation may use the record it was spawned
		// with; after a panic the actor must start from the store.
		initial = nil
		return a
	}
}

// newCoolingGroupActor makes a group actor that fails closed for coolDown
// before it loads the group from the store (see streamActor.groupStopped).
// Restarts after a panic load at once, as any group actor's do.
func newCoolingGroupActor(e *env, prefix, name string, coolDown time.Duration) actor.Producer {
	return func() actor.Actor {
		a := &groupActor{env: e, prefix: prefix, name: name, coolDown: coolDown, incarnation: e.incarnations.Add(1)}
		coolDown = 0
		return a
	}
}

// errKeptPanicking is why a group replacing one that its supervisor
// stopped fails closed for a while.
var errKeptPanicking = errors.New("the group's actor kept panicking and was stopped")

func (a *groupActor) log() *slog.Logger {
	return a.env.log.With(slog.String("stream", a.prefix), slog.String("group", a.name))
}

// Receive handles one message; protoactor never calls it concurrently.
func (a *groupActor) Receive(ctx actor.Context) {
	defer a.retryOnPanic(ctx)
	// A forced reset's hold waits for its shards' holders to go, which
	// any message may bring about.
	defer a.checkHold()
	switch ctx.Message().(type) {
	case *heartbeatMsg, *tickMsg, *flushMsg, *heldExpiredMsg, *releaseHeldMsg, *actor.Started, *actor.Restarting:
	default:
		// Admin calls and stopping see, and act on, durable state only.
		a.flush(ctx)
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		if a.coolDown > 0 {
			a.failClosed(fmt.Errorf("%w; it reloads from the store in %v", errKeptPanicking, a.coolDown))
			a.schedule(a.env.now().Add(a.coolDown))
			a.coolDown = 0
			return
		}
		a.start()
	case *actor.Restarting, *actor.Stopping:
		a.stopTimer()
		a.releaseAll(ctx)
		a.dropHold(protocol.CodeCoordinatorTerminating, "the group's actor stopped")
		if _, stopping := m.(*actor.Stopping); stopping {
			if hook := a.env.testHooks.stopping; hook != nil {
				hook(a.prefix, a.name)
			}
			// Its series would otherwise stay as they were (in cluster
			// mode, beside those of the replica that runs it now).
			a.env.obs.GroupRemoved(a.prefix, a.name, a.incarnation)
			a.dropLive()
		}
	case *heartbeatMsg:
		a.noteOrigin(m)
		a.heartbeat(ctx, m)
	case *heldExpiredMsg:
		a.heldExpired(ctx)
	case *releaseHeldMsg:
		a.releaseAll(ctx)
	case *flushMsg:
		a.flush(ctx)
	case *tickMsg:
		a.tick(ctx)
	case *getGroupMsg:
		ctx.Respond(view(a, (*assign.Group).Summary))
	case *membersMsg:
		ctx.Respond(view(a, a.memberViews))
	case *holdersMsg:
		ctx.Respond(view(a, func(g *assign.Group) map[int][]string { return g.ShardHolders(m.shards) }))
	case *assignmentsMsg:
		ctx.Respond(view(a, func(g *assign.Group) protocol.AssignmentsResponse {
			view := g.Assignments()
			view.InvariantViolations = append(view.InvariantViolations, a.regressions...)
			return view
		}))
	case *consumptionMsg:
		ctx.Respond(view(a, (*assign.Group).Consumption))
	case *routingMsg:
		ctx.Respond(view(a, func(g *assign.Group) protocol.ProducerRoutingResponse {
			return protocol.NewProducerRouting(g.StreamPrefix, g.Name, g.ShardCount, g.MetadataVersion)
		}))
	case *deleteGroupMsg:
		ctx.Respond(a.delete(m.force))
		a.wake(ctx)
	case *setLayoutMsg:
		ctx.Respond(a.setLayout(m))
		a.wake(ctx)
	case *holdShardsMsg:
		a.startHold(ctx, m)
	case *releaseHoldMsg:
		if a.hold != nil && a.hold.msg == m.hold {
			a.endHold(ctx, nil)
		}
		ctx.Respond(reply[struct{}]{})
	case *holdTimeoutMsg:
		a.holdTimedOut(ctx, m)
	case *layoutStatusMsg:
		ctx.Respond(view(a, func(g *assign.Group) layoutStatus {
			return layoutStatus{shardCount: g.ShardCount, draining: slices.Clone(g.DrainingShards), state: g.State}
		}))
	}
}

// start restores the group: from the record it was spawned with, else from
// the store. Every member gets a fresh lease so a restart expires nobody.
func (a *groupActor) start() {
	rec := a.initial
	a.initial = nil
	if rec == nil {
		sctx, cancel := a.env.storeContext()
		loaded, err := a.env.store.LoadGroup(sctx, a.prefix, a.name)
		cancel()
		if err != nil {
			a.failClosed(fmt.Errorf("load group: %w", err))
			return
		}
		rec = &loaded
	}
	if rec.Err != nil || rec.Group == nil {
		a.failClosed(fmt.Errorf("load group: %w", errors.Join(rec.Err, errIf(rec.Group == nil, "no snapshot"))))
		return
	}
	a.g, a.revision, a.failed = rec.Group, rec.Revision, nil
	a.env.failed.forget(a.prefix, a.name)
	res := assign.Restore(a.g, a.env.now(), a.env.cfg.Group)
	if res.Persist {
		// What Restore changed (restarted rebalance deadlines; a repaired
		// assignment, which may raise the assignment epoch) is written
		// before any answer can tell it: the next answer waits for a
		// flush. An epoch catch-up is not written (assign's catchUp), so
		// the assignment epoch it answers must be durable already.
		a.dirty = true
		a.changes.Add(res.Changes)
	}
	a.audit(res.Changes, true)
	a.publishState()
	a.finish(StepRestore, res)
}

func errIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}

func (a *groupActor) failClosed(err error) {
	a.dropHold(protocol.CodeStoreUnavailable, fmt.Sprintf("the group failed closed: %v", err))
	a.g, a.failed = nil, err
	a.stopTimer()
	a.env.failed.remember(a.prefix, a.name, err)
	a.env.obs.GroupRemoved(a.prefix, a.name, a.incarnation)
	a.dropLive()
	a.log().Error("group failed closed", slog.Any("error", err))
	if storeUnavailable(err) {
		// The store refuses calls until it recovered from a failed write
		// (a full disk); reload from it then, never from memory.
		a.schedule(a.env.now().Add(storeRetryDelay))
	}
}

// storeRetryDelay is how often a group that failed closed because the store
// was unavailable tries to reload.
const storeRetryDelay = time.Second

// storeUnavailable reports whether err is the store refusing for now (it
// recovers by itself), not a record that cannot be read.
func storeUnavailable(err error) bool {
	return errors.Is(err, persistence.ErrFailed) || errors.Is(err, context.DeadlineExceeded)
}

// retryOnPanic answers RETRY, at once rather than at the askers' timeout,
// to a heartbeat whose handling panicked and to every held answer (their
// changes die with this incarnation), then re-raises the panic so that the
// supervisor restarts this actor from its last durable snapshot.
func (a *groupActor) retryOnPanic(ctx actor.Context) {
	r := recover()
	if r == nil {
		return
	}
	a.log().Error("group actor panicked; restarting the group from its snapshot",
		slog.String("message", fmt.Sprintf("%T", ctx.Message())), slog.Any("panic", r))
	if m, ok := ctx.Message().(*heartbeatMsg); ok {
		m.to.refuse(assign.Retry())
	}
	for _, h := range a.held {
		h.to.refuse(assign.Retry())
	}
	a.held, a.dirty, a.changes = nil, false, persistence.Changes{}
	a.releaseAll(ctx)
	a.dropHold(protocol.CodeStoreUnavailable, "the group's actor restarts from its snapshot")
	panic(r)
}

// heartbeat runs one heartbeat through the pure state machine. An answer
// that tells a member asking to wait (waitMs) nothing new is parked (see
// held.go). Otherwise it goes out at once when nothing is waiting to be
// written, else it is held until flush has made the group durable, because
// it may build on those changes.
func (a *groupActor) heartbeat(ctx actor.Context, m *heartbeatMsg) {
	req := m.req
	if closed(m.gone) {
		// The asker gave up before the request was taken from the mailbox
		// (a timeout; our member runtime also cancels a held heartbeat to
		// report something at once): its answer would reach nobody, and
		// the request that replaced it may have been decided first (it
		// passes a held one in the mailbox; a handler slower to ask than
		// the client's timeout lets any retry pass). Decided now, its
		// report, older than what the member reads, could free shards
		// the member still reads: nothing tells a late report from a
		// current one but requestSeq, which reference clients do not
		// send. Dropping it loses nothing: the asker sends again.
		return
	}
	if p := a.parked[req.MemberID]; p != nil {
		// The member asks again (its client gave up on the parked answer,
		// or a second process uses the id): the older request is answered
		// RETRY rather than replayed on top of the newer one.
		a.unpark(p)
		p.to.refuse(assign.Retry())
	}
	if r := a.refusal(); r.Refused() {
		m.to.refuse(r)
		return
	}
	before := holdingsOf(a.g, req.MemberID)
	res := assign.Heartbeat(a.g, req, a.env.now(), a.env.cfg.Group)
	if hook := a.env.testHooks.afterDecide; hook != nil {
		hook(req)
	}
	a.finish(StepHeartbeat, res)
	if wait := a.holdFor(req, &res.Response); wait > 0 && a.env.held.take(a.env.cfg.MaxHeldHeartbeats) {
		if res.Persist {
			a.dirty = true
			a.changes.Add(res.Changes)
			a.queueFlush(ctx)
		}
		a.park(m.to, req, res.Response, wait)
	} else {
		a.answer(ctx, m.to, req, res)
	}
	if res.Persist && a.mayWakeOthers(req.MemberID, before, res.Changes) {
		a.wakeAfterWrite(ctx)
	}
}

// refusal is how the group refuses every heartbeat while it cannot decide
// one: deleted, or failed closed. The zero Refusal otherwise.
func (a *groupActor) refusal() assign.Refusal {
	switch {
	case a.deleted:
		return assign.Unknown(protocol.CodeGroupNotFound, "the group was deleted")
	case a.failed != nil:
		return assign.Retry()
	}
	return assign.Refusal{}
}

// answer sends res's response to to: at once while nothing is dirty, else
// once flush has written the group.
func (a *groupActor) answer(ctx actor.Context, to answerTo, req *protocol.HeartbeatRequest, res assign.Result) {
	a.dirty = a.dirty || res.Persist
	a.changes.Add(res.Changes)
	if !a.dirty {
		to.send(res.Response)
		return
	}
	a.held = append(a.held, heldAnswer{to: to, req: req, resp: res.Response})
	a.queueFlush(ctx)
}

// queueFlush puts one flush behind the messages already in the mailbox, so
// that every heartbeat queued now shares one synced write.
func (a *groupActor) queueFlush(ctx actor.Context) {
	if !a.flushQueued {
		a.flushQueued = true
		ctx.Send(ctx.Self(), &flushMsg{})
	}
}

// flush writes the group if it changed and releases the held answers: as
// decided when the write succeeded, RETRY when it failed (persist then
// dropped the unwritten changes). Then it does what waited for the write
// (wakeDue, auditDue).
func (a *groupActor) flush(ctx actor.Context) {
	a.flushQueued = false
	if a.dirty {
		a.write(ctx)
	}
	wake, audit := a.wakeDue, a.auditDue
	a.wakeDue, a.auditDue = false, false
	if audit && a.g != nil {
		a.auditAll()
		a.publishState() // its steps published the count before this audit
	}
	if wake {
		a.wake(ctx)
	}
}

// write persists the unwritten changes and sends the answers held for them.
func (a *groupActor) write(ctx actor.Context) {
	a.dirty = false
	changes := a.changes
	a.changes = persistence.Changes{}
	err := a.persist(&changes)
	if err != nil {
		// The parked answers were computed on changes now dropped.
		a.releaseAll(ctx)
	}
	for _, h := range a.held {
		if err != nil {
			h.to.refuse(assign.Retry())
			continue
		}
		h.to.send(h.resp)
	}
	a.held = nil
}

// wakeAfterWrite has wake look through the parked answers once the pending
// write is done.
func (a *groupActor) wakeAfterWrite(ctx actor.Context) {
	a.wakeDue = true
	a.queueFlush(ctx)
}

// tick runs the group's timers. What they change (expiries, fences) is
// written before any heartbeat answer can reveal it.
func (a *groupActor) tick(ctx actor.Context) {
	a.timer, a.timerAt = nil, time.Time{}
	if a.failed != nil && (storeUnavailable(a.failed) || errors.Is(a.failed, errKeptPanicking)) && !a.deleted {
		a.start()
		return
	}
	if a.failed != nil || a.deleted {
		return
	}
	res := assign.Tick(a.g, a.env.now(), a.env.cfg.Group)
	a.finish(StepTick, res)
	a.changes.Add(res.Changes)
	if res.Persist {
		a.dirty = true
		a.wakeAfterWrite(ctx)
	}
}

// finish reports and logs what happened and schedules the next deadline.
// A step of kind layout is always persisted.
func (a *groupActor) finish(kind string, res assign.Result) {
	a.checkEpochs(kind)
	ev := res.Events
	persisted := res.Persist || kind == StepLayout
	a.env.obs.GroupStep(a.prefix, a.name, GroupStep{Kind: kind, Events: ev, Persisted: persisted})
	a.publishLive(kind, res)
	if persisted {
		a.audit(res.Changes, kind == StepLayout)
		a.publishState()
	}
	a.trackRebalance(ev.Rebalanced)
	if len(ev.Expired) > 0 || len(ev.Fenced) > 0 || len(ev.Joined) > 0 || len(ev.Left) > 0 || len(ev.Pruned) > 0 {
		a.log().Info("membership changed",
			slog.Any("joined", ev.Joined), slog.Any("left", ev.Left), slog.Any("expired", ev.Expired),
			slog.Any("fenced", ev.Fenced), slog.Any("pruned", ev.Pruned),
			slog.Int64("groupEpoch", a.g.GroupEpoch))
	}
	// A misconfigured fleet repeats these at its heartbeat rate: logged
	// once per group and interval, with the number held back.
	if ev.DuplicateMember {
		a.env.warn.Warn("a second process heartbeats with a live member's id; answered RETRY",
			a.prefix+"\x00"+a.name, slog.String("stream", a.prefix), slog.String("group", a.name))
	}
	if ev.StaleIncarnation {
		a.env.warn.Warn("another incarnation heartbeats with a member's id; fenced alone",
			a.prefix+"\x00"+a.name, slog.String("stream", a.prefix), slog.String("group", a.name))
	}
	if len(ev.Released) > 0 {
		a.log().Info("shards released after the holder's lease lapsed", slog.Any("members", ev.Released))
	}
	a.schedule(res.Next)
}

// auditInterval is how often, at most, a group's durable steps pay for the
// full invariant check; in between each step checks only what it changed.
const auditInterval = 10 * time.Second

// audit keeps the invariant metric honest at the cost of what changed: a
// step checks the parts it changed (assign.CheckChanged); the whole group
// is checked (assign.CheckInvariants) at once when full or when that found
// something, and after the pending write (auditDue, see flush) when the
// last full check is older than auditInterval. A group whose steps stop
// changes nothing, so its last audit stays true.
func (a *groupActor) audit(changes assign.Changes, full bool) {
	if !full && len(assign.CheckChanged(a.g, changes)) == 0 {
		if time.Since(a.auditedAt) >= auditInterval {
			a.auditDue = true
		}
		return
	}
	a.auditAll()
}

// publishState reports the group's state and the violations its audits and
// epoch checks found.
func (a *groupActor) publishState() {
	a.env.obs.GroupState(a.prefix, a.name, a.incarnation, groupState(a.g, a.violations+len(a.regressions)))
}

// auditAll checks the whole group and logs what is newly violated.
func (a *groupActor) auditAll() {
	v := assign.CheckInvariants(a.g)
	if len(v) > 0 && len(v) != a.violations {
		a.log().Error("invariant violated", slog.Any("violations", v))
	}
	a.violations, a.auditedAt = len(v), time.Now()
}

// persist writes the group synced: the group record and the parts changes
// names, or every part when changes is nil. On failure the unpersisted
// change is dropped by reloading the last durable state, so that nothing
// answered later builds on it.
func (a *groupActor) persist(changes *persistence.Changes) error {
	sctx, cancel := a.env.storeContext()
	defer cancel()
	start := time.Now()
	rev, err := a.env.store.SaveGroup(sctx, a.g, changes, a.revision)
	a.env.obs.StoreWrite("group", time.Since(start), err)
	if err == nil {
		a.revision = rev
		return nil
	}
	a.log().Error("group snapshot write failed; reloading the last durable state", slog.Any("error", err))
	a.dropHold(protocol.CodeStoreUnavailable, fmt.Sprintf("the group reloads after a failed write: %v", err))
	a.g = nil
	a.start()
	return fmt.Errorf("save group %s/%s: %w", a.prefix, a.name, err)
}

// trackRebalance measures how long the group takes to converge after its
// target changed.
func (a *groupActor) trackRebalance(rebalanced bool) {
	now := a.env.now()
	if rebalanced && a.rebalanceStart.IsZero() {
		a.rebalanceStart = now
	}
	if !a.rebalanceStart.IsZero() && (a.g.State == protocol.GroupStable || a.g.State == protocol.GroupEmpty) {
		a.env.obs.RebalanceDone(a.prefix, a.name, now.Sub(a.rebalanceStart))
		a.rebalanceStart = time.Time{}
	}
}

func (a *groupActor) schedule(next time.Time) {
	if next.IsZero() {
		a.stopTimer()
		return
	}
	if a.timer != nil && a.timerAt.Equal(next) {
		return
	}
	a.stopTimer()
	self, root := a.self, a.env.system.Root
	a.timerAt = next
	a.timer = time.AfterFunc(next.Sub(a.env.now()), func() { root.Send(self, &tickMsg{}) })
}

func (a *groupActor) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer, a.timerAt = nil, time.Time{}
	}
}

// unavailable is the error of a group that cannot serve admin calls.
func (a *groupActor) unavailable() error {
	if a.deleted {
		return protocol.Errorf(protocol.CodeGroupNotFound, fmt.Sprintf("group %q of stream %q was deleted", a.name, a.prefix))
	}
	if a.failed != nil {
		return protocol.Errorf(protocol.CodeStoreUnavailable,
			fmt.Sprintf("group %q of stream %q failed closed: %v", a.name, a.prefix, a.failed))
	}
	return nil
}

// view answers a monitoring ask with f of the group, or why it cannot.
func view[T any](a *groupActor, f func(*assign.Group) T) reply[T] {
	if err := a.unavailable(); err != nil {
		return reply[T]{err: err}
	}
	return reply[T]{value: f(a.g)}
}

func (a *groupActor) delete(force bool) reply[protocol.GroupResponse] {
	if err := a.unavailable(); err != nil {
		return reply[protocol.GroupResponse]{err: err}
	}
	if n := a.g.HoldingMembers(); n > 0 && !force {
		// Not only live members: a leaving member that still drains, or a
		// fenced one whose lease has not lapsed, may still be reading, and
		// a group registered again would grant its shards at once.
		return reply[protocol.GroupResponse]{err: protocol.Errorf(protocol.CodeGroupHasActiveMembers,
			fmt.Sprintf("group %q has %d members that are live or still hold shards; stop them or delete with force", a.name, n))}
	}
	sctx, cancel := a.env.storeContext()
	defer cancel()
	start := time.Now()
	err := a.env.store.DeleteGroup(sctx, a.prefix, a.name, a.revision)
	a.env.obs.StoreWrite("group", time.Since(start), err)
	if err != nil {
		return reply[protocol.GroupResponse]{err: fmt.Errorf("delete group %s/%s: %w", a.prefix, a.name, err)}
	}
	summary := a.g.Summary()
	a.deleted = true
	a.dropHold(protocol.CodeGroupNotFound, "the group was deleted")
	a.env.obs.GroupRemoved(a.prefix, a.name, a.incarnation)
	a.dropLive()
	a.stopTimer()
	return reply[protocol.GroupResponse]{value: summary}
}

func (a *groupActor) setLayout(m *setLayoutMsg) reply[protocol.GroupResponse] {
	if err := a.unavailable(); err != nil {
		return reply[protocol.GroupResponse]{err: err}
	}
	a.g.ActiveMigration = m.migration
	res := assign.SetLayout(a.g, m.shardCount, m.draining, a.env.now(), a.env.cfg.Group)
	// A layout change is rare and may touch every member: write them all.
	if err := a.persist(nil); err != nil {
		return reply[protocol.GroupResponse]{err: err}
	}
	a.finish(StepLayout, res)
	return reply[protocol.GroupResponse]{value: a.g.Summary()}
}
