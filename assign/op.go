package assign

import (
	"slices"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// op is one call into the package (a heartbeat, a tick, a restore, a layout
// change). It carries the call's clock and config and records what changed,
// so that the follow-up work of docs/protocol.md §6.1 step 8 (assignment,
// rebalance deadlines, metadata bump, group state, correction round) runs
// once per call, and so that the result can say whether to persist.
//
// Every change to a durable field of the group goes through a method of op
// that marks it; that is what makes [Result.Persist] trustworthy. The one
// change left unmarked on purpose is an epoch catch-up (catchUp).
type op struct {
	g   *Group
	now time.Time
	cfg Config

	// persist: a durable field changed.
	persist bool
	// reassign: membership or layout changed, the assignor must run.
	reassign bool
	// metaChanged: MetadataVersion is bumped once when the call finishes.
	metaChanged bool
	// touched lists members whose holdings, state or target may have
	// changed; their rebalance deadlines are re-evaluated. A member nobody
	// touched keeps what it was judged at its last change, and a deadline
	// of it that passes is a timer (maintain). allDeadlines re-evaluates
	// every owning member (after a restore or a layout change).
	touched      []*Member
	allDeadlines bool
	// fullAssign makes runAssignor run stickyAssign over the whole group
	// (a restore or a layout change may repair what the incremental
	// assignor assumes).
	fullAssign bool
	ev         Events
	// heldEpoch is the epoch a heartbeat accepted under the previous-epoch
	// rule proved the member holds (0 otherwise); see setEpoch.
	heldEpoch int64

	// What changed, for [Result.Changes]: the group-level part, the
	// members whose part changed (few per call: a slice beats a map), the
	// members removed and the shards whose owner epoch was raised.
	groupChanged bool
	changed      []*Member
	removed      []string
	raised       []int
}

func begin(g *Group, now time.Time, cfg Config) *op {
	// A group decoded from the store may carry nil maps; every function of
	// the package may then add members and targets.
	if g.Members == nil {
		g.Members = map[string]*Member{}
	}
	if g.Target == nil {
		g.Target = map[string][]int{}
	}
	return &op{g: g, now: now, cfg: cfg.EnsureDefaults()}
}

// dirty marks a durable change to m's holdings or state and brings the
// group's index up to date with it. A live member always has a target
// entry, empty until the assignor gives it shards.
func (o *op) dirty(m *Member) {
	o.memberChanged(m)
	if _, ok := o.g.Target[m.ID]; !ok && m.State.Live() && o.g.Members[m.ID] == m {
		o.g.Target[m.ID] = []int{}
	}
	o.g.relink(m)
}

// memberChanged marks a durable change to m's part of the record.
func (o *op) memberChanged(m *Member) {
	o.persist = true
	if !slices.Contains(o.changed, m) {
		o.changed = append(o.changed, m)
	}
}

// groupChange marks a durable change to the group-level part.
func (o *op) groupChange() {
	o.persist = true
	o.groupChanged = true
}

// touch queues m for rebalance-deadline re-evaluation.
func (o *op) touch(m *Member) {
	if !slices.Contains(o.touched, m) {
		o.touched = append(o.touched, m)
	}
}

// bump records a membership or layout change: a new group epoch, a new
// metadata version at the end of the call, and a new assignment.
func (o *op) bump() {
	o.g.GroupEpoch++
	o.metaChanged = true
	o.reassign = true
	o.groupChange()
}

func (o *op) setCurrent(m *Member, s []int) {
	if !equalSets(m.Current, s) {
		m.Current = slices.Clone(s)
		o.dirty(m)
	}
	o.touch(m)
}

func (o *op) setRevoking(m *Member, s []int) {
	if !equalSets(m.Revoking, s) {
		m.Revoking = slices.Clone(s)
		o.dirty(m)
	}
	o.touch(m)
}

func (o *op) setGranted(m *Member, s []int) {
	if !equalSets(m.Granted, s) {
		m.Granted = slices.Clone(s)
		o.dirty(m)
	}
}

func (o *op) setState(m *Member, st protocol.MemberState) {
	if m.State != st {
		m.State = st
		m.StateChangedAt = o.now
		o.dirty(m)
	}
	o.touch(m)
}

// setEpoch answers a new member epoch, remembering the previous one so that
// a heartbeat whose response was lost is not fenced. PreviousEpoch is the
// epoch the member may still carry: normally the one being replaced, but
// after a heartbeat accepted with the previous epoch it stays that one —
// the member never received the epoch being replaced, and must not be
// fenced if this answer is lost too.
//
// A new epoch set here is a durable change (a fence, an expiry); an answer
// that only catches a live member up with the group uses catchUp.
func (o *op) setEpoch(m *Member, e int64) {
	if o.moveEpoch(m, e) {
		o.memberChanged(m)
	}
}

// catchUp answers live member m the group's assignment epoch e, like
// setEpoch, but does not by itself make a durable change: a member whose
// epoch moves and nothing else (the commonest answer of a group with
// churn) is not written before its answer. When something else of it
// changes in the call, or later, the record written carries the epoch set
// here.
//
// Why a forgotten epoch is safe (docs/protocol.md §6.1 steps 5 and 9):
// member epochs are not what keeps two members off one shard. The fencing
// token is the shard's owner epoch, and every grant is durable; step 6
// checks whatever a member reports against the durable current, revoking
// and granted sets and the target, and the hand-off rule frees a shard
// only on durable facts or a lapsed lease, whatever epoch the member
// carries. An epoch the coordinator answered is at most the group's
// assignment epoch, which is written before any answer that carries it and
// only rises. So after a load the stored epoch is a lower bound of what
// the member may carry and the assignment epoch an upper bound, and a
// member between the two is accepted as current (see decide) instead of
// being refused for an epoch this coordinator really issued.
func (o *op) catchUp(m *Member, e int64) {
	o.moveEpoch(m, e)
}

// moveEpoch sets m's epoch to e and PreviousEpoch as setEpoch says, and
// reports whether it changed.
func (o *op) moveEpoch(m *Member, e int64) bool {
	if m.Epoch == e {
		return false
	}
	m.PreviousEpoch = m.Epoch
	if o.heldEpoch != 0 {
		m.PreviousEpoch = o.heldEpoch
	}
	m.Epoch = e
	return true
}

func (o *op) setDeadline(m *Member, t time.Time) {
	if !m.RebalanceDeadline.Equal(t) {
		m.RebalanceDeadline = t
		o.memberChanged(m)
	}
}

// clearOwnership forgets every shard m holds, was granted or is revoking.
// Only called when the member can no longer be reading any of them
// (docs/protocol.md, the hand-off invariant): it reported them terminal,
// rejoined with epoch 0 from the same incarnation, or the lease of its last
// answer that let it read has lapsed.
func (o *op) clearOwnership(m *Member) {
	o.setCurrent(m, nil)
	o.setRevoking(m, nil)
	o.setGranted(m, nil)
	o.setWithdrawn(m, nil)
	o.setDeadline(m, time.Time{})
}

// fence makes m FENCED: epoch +1, new assignment. Its shards stay where
// they are, blocking everyone else, until it can no longer be reading them
// (see release): the fence may never reach it, and until its lease lapses
// it may read on the strength of its last OK. A heartbeat fence is answered
// FENCED_MEMBER_EPOCH, and a member that rejoins at once frees its shards
// at once.
func (o *op) fence(m *Member) {
	o.setEpoch(m, m.Epoch+1)
	o.setState(m, protocol.MemberFenced)
	o.bump()
	o.ev.Fenced = append(o.ev.Fenced, m.ID)
}

// expire makes a live member whose lease passed EXPIRED. It stopped reading
// on its own when the lease of its last readable answer passed (fail
// closed); release frees what it still holds once that is certain.
func (o *op) expire(m *Member) {
	o.setEpoch(m, m.Epoch+1)
	o.setState(m, protocol.MemberExpired)
	o.bump()
	o.ev.Expired = append(o.ev.Expired, m.ID)
}

// release frees what a member that is no longer live still holds, once it
// can no longer be reading: the lease of its last answer that let it read
// has lapsed. Nothing else (fence, expiry, deadline) frees a shard sooner.
func (o *op) release(m *Member) {
	o.clearOwnership(m)
	o.ev.Released = append(o.ev.Released, m.ID)
}

// finish runs the follow-up work of step 8 until nothing more changes: the
// assignor when needed, rebalance deadlines (which may fence and so need a
// new assignment), then one metadata bump, the correction round and the
// group state. It is idempotent and cheap when nothing changed.
func (o *op) finish() {
	for {
		if o.reassign {
			o.runAssignor()
		}
		if !o.enforceDeadlines() {
			break
		}
	}
	if o.metaChanged {
		o.g.MetadataVersion++
		o.metaChanged = false
		o.groupChange()
	}
	// The round may close on a heartbeat that changed nothing durable (the
	// last member reporting the group's version), so it is checked
	// whenever open.
	o.closeRound()
	if o.persist {
		o.refreshState()
	}
}

// runAssignor recomputes the sticky target of the live members: in
// O(what moves) when incrementalAssign applies (a join, leave or expiry in
// a settled layout), else with stickyAssign over the whole group. Both
// give the same target (TestIncrementalAssignAgrees).
func (o *op) runAssignor() {
	o.reassign = false
	g := o.g
	// The incremental assignor hands out every readable shard; while
	// shards are held out (holdout.go) the whole group is assigned.
	if !o.fullAssign && len(g.heldOut) == 0 {
		if moves, dropped, ok := incrementalAssign(g); ok {
			if len(moves)+len(dropped) > 0 {
				moved := make([]*Member, 0, len(moves)+len(dropped))
				for m, t := range moves {
					g.Target[m.ID] = t
					moved = append(moved, m)
				}
				for _, m := range dropped {
					delete(g.Target, m.ID)
					moved = append(moved, m)
				}
				o.retarget(moved)
			}
			o.assigned()
			return
		}
	}
	live := make([]string, 0, len(g.Members))
	for id, m := range g.Members {
		if m.State.Live() {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	next := stickyAssign(live, g.Target, assignableShards(g))
	if !sameTarget(g.Target, next) {
		// A member's target is stored with the member: only those whose
		// target changed are written, re-indexed and have their rebalance
		// deadline judged again.
		var moved []*Member
		for id, t := range next {
			if old, ok := g.Target[id]; !ok || !equalSets(old, t) {
				moved = append(moved, g.Members[id])
			}
		}
		for id := range g.Target {
			if _, ok := next[id]; !ok {
				if m := g.Members[id]; m != nil {
					moved = append(moved, m)
				}
			}
		}
		g.Target = next
		o.retarget(moved)
	}
	o.assigned()
}

// retarget records new targets of moved members: they are written,
// re-indexed and have their rebalance deadline judged again.
func (o *op) retarget(moved []*Member) {
	for _, m := range moved {
		o.memberChanged(m)
		o.touch(m)
	}
	o.g.relinkAll(moved...)
	o.metaChanged = true
	o.ev.Rebalanced = true
	o.groupChange()
}

// assigned records that the assignment is current.
func (o *op) assigned() {
	g := o.g
	if g.AssignmentEpoch != g.GroupEpoch {
		g.AssignmentEpoch = g.GroupEpoch
		o.groupChange()
	}
}

// enforceDeadlines gives a rebalance deadline to every member holding shards
// outside its target, clears it when it holds none any more, and fences a
// member past it. It reports whether someone was fenced.
func (o *op) enforceDeadlines() bool {
	var check []*Member
	if o.allDeadlines {
		// Map order: the outcome does not depend on it (a fence changes
		// neither targets nor other members), only the order of
		// Events.Fenced, which is sorted below. No sort of every member id
		// on each join.
		for _, m := range o.g.Members {
			if len(m.Current)+len(m.Revoking) > 0 || !m.RebalanceDeadline.IsZero() {
				check = append(check, m)
			}
		}
	} else {
		check = o.touched
	}
	o.allDeadlines = false
	o.touched = nil
	fenced := false
	firstFenced := len(o.ev.Fenced)
	defer func() { slices.Sort(o.ev.Fenced[firstFenced:]) }()
	for _, m := range check {
		if !m.State.Owning() || o.g.Members[m.ID] != m {
			continue
		}
		target := o.g.Target[m.ID]
		if m.State == protocol.MemberLeaving {
			target = nil
		}
		if subset(m.Current, target) && subset(m.Revoking, target) {
			o.setDeadline(m, time.Time{})
			continue
		}
		// The deadline itself is set by the first answer that tells the
		// member to give a shard up (see respond), not here: a member
		// cannot be late for an answer it has not received yet.
		if !m.RebalanceDeadline.IsZero() && !o.now.Before(m.RebalanceDeadline) {
			o.fence(m)
			fenced = true
		}
	}
	return fenced
}

// refreshState recomputes the group state (docs/protocol.md §6.2): EMPTY without
// live members, RECONCILING while a live member's current set differs from
// its target or anything is blocked, else STABLE. STABLE therefore means
// nothing is blocked, which lets a steady heartbeat skip the blocked-set
// computation.
//
// It costs O(1): the index counts live, unsettled members and blocked shards.
func (o *op) refreshState() {
	g := o.g
	x := g.index()
	st := protocol.GroupStable
	switch {
	case x.live == 0:
		st = protocol.GroupEmpty
	case x.unsettled > 0 || x.blocked > 0:
		st = protocol.GroupReconciling
	}
	if g.State != st {
		g.State = st
		o.groupChange()
	}
}

// result finishes the call and says what the actor must do.
//
// The next timer of a large group is a lower bound kept in O(what
// changed): a timer that moves later (a renewed lease) leaves the bound
// valid, and every other timer change (a state, a deadline, holdings) is a
// durable change of a member this call lists. The whole group is rescanned
// only after a maintenance pass, which runs when the bound is reached. A
// small group is rescanned after every durable change: exact, so that a
// tick is never early, and as cheap as the step itself.
func (o *op) result(resp protocol.HeartbeatResponse) Result {
	switch {
	case !o.g.timersKnown || (o.persist && len(o.g.Members) <= exactTimersUpTo):
		o.scanTimers()
	case o.persist:
		for _, m := range o.changed {
			if o.g.Members[m.ID] == m {
				o.lowerTimer(m)
			}
		}
	}
	next := time.Time{}
	if o.g.timersKnown {
		next = o.g.nextTimer
	}
	return Result{Response: resp, Persist: o.persist, Next: next, Events: o.ev, Changes: o.changes()}
}

// exactTimersUpTo is the largest group whose next timer is rescanned after
// every durable change (see result).
const exactTimersUpTo = 64

// changes lists what the call changed. It costs O(what changed).
func (o *op) changes() Changes {
	if !o.persist {
		return Changes{}
	}
	c := Changes{Group: o.groupChanged}
	for _, m := range o.changed {
		if o.g.Members[m.ID] == m {
			c.Members = append(c.Members, m.ID)
		}
	}
	slices.Sort(c.Members)
	c.Members = slices.Compact(c.Members)
	for _, id := range o.removed {
		// A member pruned and joined again under its id in the same call
		// (a late copy of its join, a process back after the retention)
		// is a new member: written whole, not removed.
		if o.g.Members[id] == nil {
			c.Removed = append(c.Removed, id)
		}
	}
	slices.Sort(c.Removed)
	if len(o.raised) > 0 {
		c.OwnerEpochs = normalize(o.raised)
	}
	if c.Empty() {
		// Something durable changed that no setter names: never claim
		// nothing changed when the caller must write.
		c.Group = true
	}
	return c
}

// sortedIDs returns the member ids in order, so that maintenance passes and
// events are deterministic whatever the map order.
func sortedIDs(members map[string]*Member) []string {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// sameTarget reports whether two targets give the same shards to the same
// members.
func sameTarget(a, b map[string][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for id, s := range a {
		t, ok := b[id]
		if !ok || !equalSets(s, t) {
			return false
		}
	}
	return true
}
