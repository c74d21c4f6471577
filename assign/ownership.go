package assign

import (
	"github.com/rscoord/rscoord/protocol"
)

// holdings is the blocked-set index of one call: for every shard, its target
// owner and whether another member still holds it. Any member that holds a
// shard blocks it, whatever its state: a fenced or expired member keeps its
// sets until it can no longer be reading (see release). A member holds a
// shard while it is in its Current, Revoking or Granted set: Current and
// Revoking are what it reported, Granted what the last response let it
// start, which it may be reading before its next report says so.
//
// docs/protocol.md §6.1 defines blocked(m) over current and revoking only; we add
// granted because without it a shard granted to A, started, and moved to B
// by a join before A's next report would be granted to B while A reads it.
type holdings struct {
	owner   []*Member // target owner by shard index; nil = none
	blocked []bool    // in some live member's target, held by another owning member
	any     bool      // some shard is blocked
}

// holdings returns the index, building it in O(shards + members) when a
// change made it stale. Only calls that change something or answer a
// RECONCILING group need it.
func (o *op) holdings() *holdings {
	if o.g.hold != nil {
		return o.g.hold
	}
	g := o.g
	size := 0
	grow := func(s []int) {
		if len(s) > 0 && s[len(s)-1]+1 > size {
			size = s[len(s)-1] + 1
		}
	}
	for _, t := range g.Target {
		grow(t)
	}
	for _, m := range g.Members {
		if holds(m) {
			grow(m.Current)
			grow(m.Revoking)
			grow(m.Granted)
		}
	}
	h := &holdings{owner: make([]*Member, size), blocked: make([]bool, size)}
	for id, t := range g.Target {
		m := g.Members[id]
		if m == nil || !m.State.Live() {
			continue
		}
		for _, s := range t {
			if s >= 0 {
				h.owner[s] = m
			}
		}
	}
	mark := func(m *Member, set []int) {
		for _, s := range set {
			if s >= 0 && h.owner[s] != nil && h.owner[s] != m {
				h.blocked[s] = true
				h.any = true
			}
		}
	}
	for _, m := range g.Members {
		if holds(m) {
			mark(m, m.Current)
			mark(m, m.Revoking)
			mark(m, m.Granted)
		}
	}
	o.g.hold = h
	return h
}

// blockedOf returns blocked(m): the shards of m's target that another owning
// member still holds. In a STABLE group that this call has not changed
// nothing is blocked (see refreshState), so the steady heartbeat pays
// nothing here.
func (o *op) blockedOf(m *Member) []int {
	target := o.g.Target[m.ID]
	if len(target) == 0 || (o.g.State == protocol.GroupStable && !o.persist) {
		return nil
	}
	h := o.holdings()
	var out []int
	for _, s := range target {
		if s < len(h.blocked) && h.blocked[s] {
			out = append(out, s)
		}
	}
	return out
}

// assignable returns target(m) − blocked(m): what m may read now. The
// result may alias the group's target when nothing is blocked; callers
// treat it as read-only (the setters clone).
func (o *op) assignable(m *Member) []int {
	target := o.g.Target[m.ID]
	blocked := o.blockedOf(m)
	if len(blocked) == 0 {
		return target
	}
	return minus(target, blocked)
}

// authorized reports whether every shard the report says m owns, is still
// revoking (non-terminal) or made progress on lies inside m's authority
// (docs/protocol.md §6.1 step 6): what was accepted before (current ∪ revoking ∪
// granted) plus what it may read now (target − blocked). Anything else is a
// shard another member may own: the reporter is a zombie and is fenced.
func (o *op) authorized(m *Member, owned, revoking []int, progress []protocol.ShardProgress) bool {
	accepted := func(s int) bool {
		return contains(m.Current, s) || contains(m.Revoking, s) || contains(m.Granted, s)
	}
	// Check the accepted sets first: a steady report never needs the
	// blocked sets.
	var rest []int
	for _, s := range owned {
		if !accepted(s) {
			rest = append(rest, s)
		}
	}
	for _, s := range revoking {
		if !accepted(s) {
			rest = append(rest, s)
		}
	}
	for _, p := range progress {
		if !accepted(p.Shard.ShardIndex) {
			rest = append(rest, p.Shard.ShardIndex)
		}
	}
	if len(rest) == 0 {
		return true
	}
	avail := o.assignable(m)
	for _, s := range rest {
		if !contains(avail, s) {
			return false
		}
	}
	return true
}

// authority returns m's authority as a set (see authorized).
func (o *op) authority(m *Member) []int {
	return union(union(m.Current, m.Revoking), union(m.Granted, o.assignable(m)))
}

// nonTerminal returns the set of reported revoking shards the member has not
// fully let go of yet (anything but REVOKED with nothing in flight).
func nonTerminal(rs []protocol.RevokingShard) []int {
	var out []int
	for _, r := range rs {
		if !r.Terminal() {
			out = append(out, r.Shard.ShardIndex)
		}
	}
	return normalize(out)
}

// holdsOutside reports whether m holds shards outside its target: it is
// then told to heartbeat fast and has a rebalance deadline.
func holdsOutside(m *Member, target []int) bool {
	return !subset(m.Current, target) || !subset(m.Revoking, target)
}
