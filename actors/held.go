package actors

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// Held heartbeats (docs/protocol.md §9.5, waitMs). A heartbeat carrying waitMs is
// recorded at once like any other (lease, progress, assignment). When its
// answer tells the member nothing new it is parked instead of sent: the
// group actor keeps the asker's answerTo and the request, and sends the answer,
// computed afresh by running the heartbeat again, as soon as a change of the
// group would tell the member something (assign.Unchanged turns false; it
// looks once the change is written, see wakeAfterWrite) or when the wait
// ends (the group's one wait timer, heldwaits.go). Nothing here blocks
// the mailbox: a parked answer is a stored reply address and an entry in
// the group's queue of wait ends.
//
// Parked answers are released RETRY on shutdown, on a failed write, on a
// panic of the actor and when the same member heartbeats again; a deleted
// group answers them as it answers any heartbeat (UNKNOWN_MEMBER_ID).

// parkedAnswer is a held heartbeat waiting for news or for its wait to end.
type parkedAnswer struct {
	to  answerTo
	req *protocol.HeartbeatRequest
	// resp is the answer as computed when the heartbeat arrived; the
	// answer sent is computed afresh.
	resp protocol.HeartbeatResponse
	seq  uint64
	// due is when its wait ends, on this process's monotonic clock (the
	// wait timer's, not the group's clock of decisions).
	due time.Time
}

// Messages of held heartbeats.
type (
	// heldExpiredMsg is the group's wait timer firing: the waits of
	// parked answers ended (heldwaits.go).
	heldExpiredMsg struct{}
	// releaseHeldMsg answers every parked heartbeat RETRY: the
	// coordinator is shutting down, or the group is moving.
	releaseHeldMsg struct{}
)

// holdFor says how long the answer resp to req may be held: zero when it
// must go out at once. It is held only when the member asked for it and the
// answer tells it no news (docs/protocol.md §9.5): status OK and assigned
// shards equal to the owned ones (so nothing granted, nothing revoked). A
// new member epoch, group epoch or metadata version alone is no news: the
// answer sent when the wait ends, computed afresh, carries them. (Answering
// a request behind in them at once made every member of a churning group
// heartbeat twice an interval, the catch-up after the early answer often
// behind again, and the not-held answers queued behind those.) A member
// still revoking shards is answered at once: it will report them terminal
// soon and must not wait for its own held answer to do so.
func (a *groupActor) holdFor(req *protocol.HeartbeatRequest, resp *protocol.HeartbeatResponse) time.Duration {
	if req.WaitMs <= 0 || a.env.terminating.Load() {
		return 0
	}
	if resp.Status != protocol.StatusOK {
		return 0
	}
	for _, r := range req.RevokingShards {
		if !r.Terminal() {
			return 0
		}
	}
	if !sameShards(resp.Assignment.AssignedShards, req.OwnedShards) {
		return 0
	}
	// The wait never exceeds the interval the answer carries: a member in a
	// hand-off (short interval) is held no longer than it would sleep.
	return time.Duration(min(req.WaitMs, resp.HeartbeatIntervalMs)) * time.Millisecond
}

// sameShards reports whether two wire shard lists name the same set.
func sameShards(a, b []protocol.Shard) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := protocol.Indexes(a), protocol.Indexes(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// heldBudget is the count of heartbeats held across every group, bounded
// by one server-wide limit: each held answer keeps an HTTP connection busy,
// and the connections a server may hold are shared by all its groups.
type heldBudget struct {
	n atomic.Int64
}

// take counts one more held heartbeat if fewer than max are held.
func (b *heldBudget) take(max int) bool {
	for {
		n := b.n.Load()
		if n >= int64(max) {
			return false
		}
		if b.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// give returns what take counted.
func (b *heldBudget) give() { b.n.Add(-1) }

// park holds the answer to req for at most wait. The caller has taken one
// from the held budget; unpark gives it back.
func (a *groupActor) park(to answerTo, req *protocol.HeartbeatRequest, resp protocol.HeartbeatResponse, wait time.Duration) {
	if a.parked == nil {
		a.parked = map[string]*parkedAnswer{}
	}
	a.parkSeq++
	p := &parkedAnswer{to: to, req: req, resp: resp, seq: a.parkSeq, due: time.Now().Add(wait)}
	a.parked[req.MemberID] = p
	a.waits.add(p)
	a.armWaits()
}

// unpark forgets p. Its entry in the queue of wait ends stays, told stale
// by its seq, until it comes due or the queue empties.
func (a *groupActor) unpark(p *parkedAnswer) {
	delete(a.parked, p.req.MemberID)
	a.env.held.give()
}

// heldExpired sends the parked answers whose wait ended, and those whose
// wait ends within heldCoalesce: one timer firing answers every wait
// ending about then (the protocol lets any held answer go early).
func (a *groupActor) heldExpired(ctx actor.Context) {
	a.waits.fired()
	woke := false
	for p := range a.waits.due(time.Now().Add(heldCoalesce), a.parked) {
		if a.release(ctx, p) {
			woke = true
		}
	}
	a.armWaits()
	if woke {
		a.wakeAfterWrite(ctx)
	}
}

// release sends p's answer, computed afresh by running its heartbeat again
// on the current state: a held answer is never older than what it reports.
// Like any answer it waits for the group's pending write. It reports
// whether the run changed the group durably.
func (a *groupActor) release(ctx actor.Context, p *parkedAnswer) bool {
	a.unpark(p)
	if r := a.refusal(); r.Refused() {
		p.to.refuse(r)
		return false
	}
	before := holdingsOf(a.g, p.req.MemberID)
	res := assign.Heartbeat(a.g, p.req, a.env.now(), a.env.cfg.Group)
	a.finish(StepHeldAnswer, res)
	a.answer(ctx, p.to, p.req, res)
	return res.Persist && a.mayWakeOthers(p.req.MemberID, before, res.Changes)
}

// holdings is what of one member the other members' answers depend on:
// the shards it holds, which block them (assign's blocked sets). The
// slices are the group's own; assign replaces them on a change, never
// edits them in place.
type holdings struct {
	known                      bool
	current, revoking, granted []int
}

func holdingsOf(g *assign.Group, id string) holdings {
	if g == nil {
		return holdings{}
	}
	m := g.Members[id]
	if m == nil {
		return holdings{}
	}
	return holdings{known: true, current: m.Current, revoking: m.Revoking, granted: m.Granted}
}

// mayWakeOthers says whether changes, made by a heartbeat of member id that
// held before before it, may have changed the answer parked for another
// member, so that wake must look at every parked answer. A parked answer
// depends on the group-level part (state, correction round, epochs, the
// target), on its own member and on the shards the others hold
// (assign.Unchanged). The commonest change by far — a member catching up
// with the group's epoch, its shards as they were — touches none of those
// of any other member: checking every parked answer of the group after
// each of them made the group actor's work per change grow with the
// members parked, and the joins and reports queued behind it.
func (a *groupActor) mayWakeOthers(id string, before holdings, changes assign.Changes) bool {
	if changes.Group || len(changes.Removed) > 0 || len(changes.OwnerEpochs) > 0 {
		return true
	}
	for _, m := range changes.Members {
		if m != id {
			return true
		}
	}
	after := holdingsOf(a.g, id)
	return before.known != after.known || !slices.Equal(before.current, after.current) ||
		!slices.Equal(before.revoking, after.revoking) || !slices.Equal(before.granted, after.granted)
}

// wake sends every parked answer that would now tell its member something
// new. Sending one may change the group (a re-run heartbeat can persist),
// which may wake others: it repeats until nothing more changes. Each parked
// answer is sent at most once, so it ends.
func (a *groupActor) wake(ctx actor.Context) {
	for changed := true; changed && len(a.parked) > 0; {
		changed = false
		for _, p := range a.parked {
			if a.g != nil && !a.deleted && a.failed == nil && assign.Unchanged(a.g, &p.resp) {
				continue
			}
			if a.release(ctx, p) {
				changed = true
			}
		}
	}
}

// releaseAll answers every parked heartbeat RETRY: the member keeps its
// shards and heartbeats again.
func (a *groupActor) releaseAll(ctx actor.Context) {
	for _, p := range a.parked {
		a.unpark(p)
		p.to.refuse(assign.Retry())
	}
	a.armWaits()
}

// Mailbox priorities of a group actor (protoactor's priority mailbox).
// Heartbeats not asking to be held (joins, leaves, reports) pass the held
// work queued before them: a member that asked to wait loses nothing by
// waiting a little longer, and at 20,000 held members a join no longer
// queues behind its group's held arrivals and releases. Held heartbeats,
// the ends of their waits and the group's timers keep their order among
// themselves; messages without a priority (admin calls, the write after a
// change) sit between.
const (
	priorityHeld   = actor.DefaultPriority - 2
	priorityAtOnce = actor.DefaultPriority + 2
)

// GetPriority puts held heartbeats behind the rest of the group's mailbox.
func (m *heartbeatMsg) GetPriority() int8 {
	if m.req.WaitMs > 0 {
		return priorityHeld
	}
	return priorityAtOnce
}

// GetPriority puts the end of a wait behind the rest of the mailbox.
func (*heldExpiredMsg) GetPriority() int8 { return priorityHeld }

// GetPriority keeps the group's timers (expiries, fences) behind held
// heartbeats queued before them, as in arrival order: a member whose
// heartbeat is already in the mailbox is not expired for the wait.
func (*tickMsg) GetPriority() int8 { return priorityHeld }

// closed reports whether ch is closed; a nil channel never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
