package assign

import (
	"slices"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Tick runs the group's timers at now (docs/protocol.md §6.1 step 3 and the
// timer half of step 8, as amended by the hand-off invariant of
// docs/protocol.md):
//
//   - a live member past its lease becomes EXPIRED (epoch +1);
//   - an owning member (LEAVING included) past its rebalance deadline is
//     FENCED;
//   - a member that is no longer live (EXPIRED, FENCED, LEAVING) and still
//     holds shards is released once the lease of its last answer that let
//     it read has lapsed (Member.ReadableUntil): only then can it no longer
//     be reading, so only then are its shards free for others;
//   - a terminal member (EXPIRED, FENCED or LEAVING, holding nothing) is
//     removed StaleMemberRetention after it became terminal.
//
// When a member could both expire and be fenced, whichever time came first
// wins. Membership changes bump GroupEpoch and reassign. Result.Response is
// the zero value. The actor calls Tick at [Result.Next]; an early call is
// harmless.
func Tick(g *Group, now time.Time, cfg Config) Result {
	o := begin(g, now, cfg)
	o.maintain(true, "")
	o.finish()
	return o.result(protocol.HeartbeatResponse{})
}

// Restore prepares a group just loaded from the store, before any other
// call: every owning member gets a fresh lease now+MemberLease and every
// running rebalance deadline restarts at now+RebalanceTimeout, so that the
// coordinator's downtime expires or fences nobody (members could not
// heartbeat meanwhile). Every member still holding shards may read them
// until now+MemberLease (when it last heard an answer is not durable).
// Leases are not durable anyway. Every member is epoch-unconfirmed: the
// store does not keep epoch catch-ups, so the member may carry a higher
// epoch than the stored one, which its next heartbeat may prove (see
// catchUp and decide). It also re-runs the assignor (a no-op on a
// consistent group; it repairs one that is not), recomputes the group
// state and says when to Tick.
func Restore(g *Group, now time.Time, cfg Config) Result {
	o := begin(g, now, cfg)
	g.idx = nil // the caller may have edited the group (a load, a repair)
	g.loaded = !g.created
	// What a lost history could have reached is bounded from the version
	// loaded (correction.go).
	g.correctionCap = capAfter(g.MetadataVersion, o.cfg.MaxCorrectionStep)
	for _, m := range g.Members {
		// A member decoded from a record is unconfirmed already (the zero
		// value); a caller restoring a group it kept in memory gets the
		// same rule.
		m.epochConfirmed = false
		if holds(m) {
			// When the member last heard an answer is not durable: it may
			// read until a whole lease from now.
			m.ReadableUntil = now.Add(o.cfg.MemberLease)
		}
		if !m.State.Owning() {
			continue
		}
		m.LeaseExpiresAt = now.Add(o.cfg.MemberLease)
		if !m.RebalanceDeadline.IsZero() {
			o.setDeadline(m, now.Add(o.cfg.RebalanceTimeout))
		}
	}
	o.reassign = true
	o.fullAssign = true
	o.allDeadlines = true
	o.finish()
	o.closeRound()
	o.refreshState()
	o.scanTimers()
	return o.result(protocol.HeartbeatResponse{})
}

// maintain runs the timers that are due. Unless force, it returns at once
// while no timer can be due (the steady heartbeat's case). skipDeadline
// names a member whose rebalance deadline is judged later in the call. It
// reports whether it scanned.
func (o *op) maintain(force bool, skipDeadline string) bool {
	g := o.g
	if !force && g.timersKnown && (g.nextTimer.IsZero() || o.now.Before(g.nextTimer)) {
		return false
	}
	due := func(t time.Time) bool { return !t.IsZero() && !o.now.Before(t) }
	// Map order: what happens to one member depends on its own timers
	// only, so the outcome is the same in any order but for the order of
	// the event lists, which are sorted below. No sort of every member id.
	ev := &o.ev
	marks := [...]int{len(ev.Expired), len(ev.Fenced), len(ev.Released), len(ev.Pruned)}
	defer func() {
		slices.Sort(ev.Expired[marks[0]:])
		slices.Sort(ev.Fenced[marks[1]:])
		slices.Sort(ev.Released[marks[2]:])
		slices.Sort(ev.Pruned[marks[3]:])
	}()
	for id, m := range g.Members {
		if m.State.Owning() && m.LeaseExpiresAt.IsZero() {
			// A lease unknown after a load without Restore: start one rather
			// than expire a member for our own restart.
			m.LeaseExpiresAt = o.now.Add(o.cfg.MemberLease)
		}
		if holds(m) && m.ReadableUntil.IsZero() {
			// Likewise: it may read for a whole lease from now.
			m.ReadableUntil = o.now.Add(o.cfg.MemberLease)
		}
		leaseDue := due(m.LeaseExpiresAt)
		deadlineDue := id != skipDeadline && due(m.RebalanceDeadline)
		// When both passed, the earlier one decides.
		leaseFirst := leaseDue && (!deadlineDue || !m.RebalanceDeadline.Before(m.LeaseExpiresAt))
		switch {
		case m.State.Live() && leaseFirst:
			o.expire(m)
		case m.State.Owning() && deadlineDue && !leaseFirst:
			o.fence(m)
		}
		if !m.State.Live() && holds(m) && due(m.ReadableUntil) {
			o.release(m)
		}
		if terminal(m) && due(m.StateChangedAt.Add(o.cfg.StaleMemberRetention)) {
			o.prune(id)
		}
	}
	g.timersKnown = false // rescanned when the call ends
	return true
}

// prune removes terminal member id from the group.
func (o *op) prune(id string) {
	m := o.g.Members[id]
	delete(o.g.Members, id)
	delete(o.g.Target, id)
	if m != nil {
		o.g.relink(m)
	}
	o.removed = append(o.removed, id)
	o.bump()
	o.ev.Pruned = append(o.ev.Pruned, id)
}

// roomToJoin reports whether one more member fits under cfg.MaxMembers.
// At the cap the terminal member that ended first (it holds nothing and
// only waits for its retention to pass) is pruned early to make room.
func (o *op) roomToJoin() bool {
	if len(o.g.Members) < o.cfg.MaxMembers {
		return true
	}
	// The earliest end, ties broken by id: deterministic, with no sort.
	oldest := ""
	var end time.Time
	for id, m := range o.g.Members {
		if terminal(m) && (oldest == "" || m.StateChangedAt.Before(end) || m.StateChangedAt.Equal(end) && id < oldest) {
			oldest, end = id, m.StateChangedAt
		}
	}
	if oldest == "" {
		return false
	}
	o.prune(oldest)
	return len(o.g.Members) < o.cfg.MaxMembers
}

// holds reports whether m still holds, revokes or was granted shards:
// while it does they block everyone else (docs/protocol.md, the hand-off
// invariant), whatever its state.
func holds(m *Member) bool { return len(m.Current)+len(m.Revoking)+len(m.Granted) > 0 }

// terminal reports whether m is EXPIRED, FENCED or LEAVING and holds
// nothing any more: such members only wait to be pruned.
func terminal(m *Member) bool {
	return !m.State.Live() && !holds(m)
}

// scanTimers recomputes the earliest timer of the group exactly.
func (o *op) scanTimers() {
	g := o.g
	var next time.Time
	for _, m := range g.Members {
		next = earlier(next, o.memberTimer(m))
	}
	g.nextTimer = next
	g.timersKnown = true
}

// lowerTimer keeps the group's next timer a lower bound after m's timers
// changed.
func (o *op) lowerTimer(m *Member) {
	o.g.nextTimer = earlier(o.g.nextTimer, o.memberTimer(m))
}

// memberTimer is m's earliest timer: its prune when terminal, else its
// lease and rebalance deadline while owning, and the end of its last
// readable answer while it holds shards but is no longer live. Zero: none.
func (o *op) memberTimer(m *Member) time.Time {
	var next time.Time
	switch {
	case terminal(m):
		next = m.StateChangedAt.Add(o.cfg.StaleMemberRetention)
	case m.State.Owning():
		next = earlier(m.LeaseExpiresAt, m.RebalanceDeadline)
	}
	if !m.State.Live() && holds(m) {
		next = earlier(next, m.ReadableUntil)
	}
	return next
}

// earlier returns the earlier of two times, a zero time meaning none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
