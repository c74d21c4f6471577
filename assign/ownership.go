package assign

import (
	"github.com/rscoord/rscoord/client/protocol"
)

// Blocked sets (docs/protocol.md §6.1): a shard of a live member's target
// is blocked while another member holds it, whatever that member's state:
// a fenced or expired member keeps its sets until it can no longer be
// reading (see release). A member holds a shard while it is in its Current,
// Revoking or Granted set: Current and Revoking are what it reported,
// Granted what the last response let it start, which it may be reading
// before its next report says so. The group's index (index.go) counts the
// holders of every shard, so that blocked(m) costs O(m's target).
//
// docs/protocol.md §6.1 defines blocked(m) over current and revoking only; we add
// granted because without it a shard granted to A, started, and moved to B
// by a join before A's next report would be granted to B while A reads it.

// blockedOf returns blocked(m): the shards of live member m's target that
// another member still holds. In a STABLE group that this call has not
// changed nothing is blocked (see refreshState), so the steady heartbeat
// pays nothing here.
func (o *op) blockedOf(m *Member) []int {
	target := o.g.Target[m.ID]
	if len(target) == 0 || !m.State.Live() || (o.g.State == protocol.GroupStable && !o.persist) {
		return nil
	}
	x := o.g.index()
	var out []int
	for _, s := range target {
		if x.heldByOthers(m, s) {
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
