package assign

import (
	"slices"
	"strings"

	"github.com/rscoord/rscoord/client/protocol"
)

// index is derived state of a group that lets one call cost what it
// changes: per shard, how many members hold it, are granted it or target
// it, and its live target owner; per group, the counts the group state and
// the metrics need. It is never persisted. It is built in O(members +
// shards) the first time a call needs it (after a load, a [Restore], a
// [SetLayout]) and then kept exact by relink, which every setter of op
// calls for the member it changed, in O(that member's shards).
//
// The index counts what it last linked of each member (Member.ix), never
// the member's fields directly, so that undoing a member's contribution is
// exact whatever was edited in between.
type index struct {
	// By shard index; they grow to the highest shard seen.
	held     []int32   // members holding it: current ∪ revoking ∪ granted, any state
	granted  []int32   // members it is granted to
	targeted []int32   // members whose target holds it, any state
	owner    []*Member // a live member whose target holds it; nil = none

	// blocked counts the shards owned by a live member and held by
	// another member (see blocked): while there is one the group is
	// RECONCILING.
	blocked int
	// live counts ACTIVE and STARTING members, unsettled the live ones
	// whose current set differs from their target.
	live, unsettled int
	// byState counts members by state; revoking sums their revoking sets.
	byState  map[protocol.MemberState]int
	revoking int

	// What the incremental assignor (assignor.go) needs: the live members
	// by target size, each class sorted by id, and what tells whether the
	// targets are clean (pairwise disjoint, readable, only live members').
	classes     map[int][]*Member
	liveLoad    int     // Σ target sizes of live members
	liveTargets []int32 // by shard: live members whose target holds it
	overlap     int     // Σ max(0, liveTargets[s]−1)
	unreadable  int     // live target entries that are not readable
	// deadTargets are the members that are not live but have a target
	// entry: a leaver's or an expired member's, whose shards the next
	// assignment frees.
	deadTargets map[*Member]struct{}
	noTarget    int  // live members without a target entry
	building    bool // classes are sorted once at the end of a build

	// stamp and gen de-duplicate the shards one relink touches.
	stamp   []uint32
	gen     uint32
	touched []int
}

// linked is what the index last counted of a member. The slices alias the
// member's own: setters always store fresh slices, never edit in place.
type linked struct {
	in, hasTarget                      bool
	state                              protocol.MemberState
	current, revoking, granted, target []int
}

// index returns g's index, building it when a load or a layout change
// dropped it.
func (g *Group) index() *index {
	if g.idx == nil {
		x := &index{byState: map[protocol.MemberState]int{}, classes: map[int][]*Member{},
			deadTargets: map[*Member]struct{}{}, building: true}
		for _, m := range g.Members {
			m.ix = linked{}
			x.link(g, m)
		}
		x.building = false
		for _, c := range x.classes {
			slices.SortFunc(c, byID)
		}
		for s := range x.owner {
			if x.isBlocked(s) {
				x.blocked++
			}
		}
		g.idx = x
	}
	return g.idx
}

// relink makes the index count m as it is now: removed from the group, or
// with its current state, sets and target. A no-op while no index is built.
func (g *Group) relink(m *Member) {
	g.relinkAll(m)
}

// relinkAll relinks several members at once: a shard moving from one
// target to another changes owner only once both are relinked.
func (g *Group) relinkAll(ms ...*Member) {
	x := g.idx
	if x == nil {
		return
	}
	// Every shard whose blocked state may change: what the members held or
	// targeted before and hold or target now.
	x.gen++
	if x.gen == 0 { // wrapped: stamps from 2^32 relinks ago would match
		clear(x.stamp)
		x.gen = 1
	}
	x.touched = x.touched[:0]
	for _, m := range ms {
		for _, set := range [...][]int{m.ix.current, m.ix.revoking, m.ix.granted, m.ix.target} {
			x.touch(set)
		}
		if g.Members[m.ID] == m {
			for _, set := range [...][]int{m.Current, m.Revoking, m.Granted, g.Target[m.ID]} {
				x.touch(set)
			}
		}
	}
	for _, s := range x.touched {
		if x.isBlocked(s) {
			x.blocked--
		}
	}
	for _, m := range ms {
		x.unlink(g, m)
	}
	for _, m := range ms {
		if g.Members[m.ID] == m {
			x.link(g, m)
		}
	}
	for _, s := range x.touched {
		if x.isBlocked(s) {
			x.blocked++
		}
	}
}

// touch adds the shards of set to x.touched, once each, and makes room
// for them.
func (x *index) touch(set []int) {
	for _, s := range set {
		if s < 0 {
			continue
		}
		x.fit(s)
		if x.stamp[s] != x.gen {
			x.stamp[s] = x.gen
			x.touched = append(x.touched, s)
		}
	}
}

// fit grows the per-shard slices to hold shard s.
func (x *index) fit(s int) {
	if s < len(x.held) {
		return
	}
	n := max(s+1, 2*len(x.held))
	grow := func(v []int32) []int32 { return append(v, make([]int32, n-len(v))...) }
	x.held, x.granted, x.targeted, x.liveTargets = grow(x.held), grow(x.granted), grow(x.targeted), grow(x.liveTargets)
	x.owner = append(x.owner, make([]*Member, n-len(x.owner))...)
	x.stamp = append(x.stamp, make([]uint32, n-len(x.stamp))...)
}

// link counts m as it is now.
func (x *index) link(g *Group, m *Member) {
	target, has := g.Target[m.ID]
	l := linked{in: true, hasTarget: has, state: m.State, current: m.Current, revoking: m.Revoking, granted: m.Granted, target: target}
	m.ix = l
	x.count(g, m, l, 1)
}

// unlink removes what was counted of m.
func (x *index) unlink(g *Group, m *Member) {
	if !m.ix.in {
		return
	}
	x.count(g, m, m.ix, -1)
	m.ix = linked{}
}

// count adds (d = 1) or removes (d = -1) the contribution l of m.
func (x *index) count(g *Group, m *Member, l linked, d int) {
	eachHeld(l, func(s int) {
		x.fit(s)
		x.held[s] += int32(d)
	})
	for _, s := range l.granted {
		if s >= 0 {
			x.fit(s)
			x.granted[s] += int32(d)
		}
	}
	live := l.state.Live()
	for _, s := range l.target {
		if s < 0 {
			continue
		}
		x.fit(s)
		x.targeted[s] += int32(d)
		if live {
			switch {
			case d > 0 && x.owner[s] == nil:
				x.owner[s] = m
			case d < 0 && x.owner[s] == m:
				x.owner[s] = nil
			}
			if d > 0 {
				if x.liveTargets[s] > 0 {
					x.overlap++
				}
				x.liveTargets[s]++
			} else {
				x.liveTargets[s]--
				if x.liveTargets[s] > 0 {
					x.overlap--
				}
			}
			if !readable(g, s) {
				x.unreadable += d
			}
		}
	}
	if live {
		x.live += d
		if !equalSets(l.current, l.target) {
			x.unsettled += d
		}
		x.liveLoad += d * len(l.target)
		if !l.hasTarget {
			x.noTarget += d
		}
		x.classify(m, len(l.target), d)
	} else if l.hasTarget {
		if d > 0 {
			x.deadTargets[m] = struct{}{}
		} else {
			delete(x.deadTargets, m)
		}
	}
	x.byState[l.state] += d
	if x.byState[l.state] == 0 {
		delete(x.byState, l.state)
	}
	x.revoking += d * len(l.revoking)
}

// classify adds (d = 1) or removes (d = -1) live member m to or from the
// class of members whose target holds load shards.
func (x *index) classify(m *Member, load, d int) {
	c := x.classes[load]
	if x.building {
		x.classes[load] = append(c, m)
		return
	}
	i, found := slices.BinarySearchFunc(c, m, byID)
	switch {
	case d > 0 && !found:
		x.classes[load] = slices.Insert(c, i, m)
	case d < 0 && found:
		if c = slices.Delete(c, i, i+1); len(c) == 0 {
			delete(x.classes, load)
		} else {
			x.classes[load] = c
		}
	}
}

func byID(a, b *Member) int { return strings.Compare(a.ID, b.ID) }

// eachHeld calls f once for every shard in l's current, revoking or
// granted set, in order (a three-way merge of sorted sets).
func eachHeld(l linked, f func(s int)) {
	a, b, c := l.current, l.revoking, l.granted
	for len(a)+len(b)+len(c) > 0 {
		s := int(^uint(0) >> 1)
		for _, set := range [...][]int{a, b, c} {
			if len(set) > 0 && set[0] < s {
				s = set[0]
			}
		}
		for len(a) > 0 && a[0] == s {
			a = a[1:]
		}
		for len(b) > 0 && b[0] == s {
			b = b[1:]
		}
		for len(c) > 0 && c[0] == s {
			c = c[1:]
		}
		if s >= 0 {
			f(s)
		}
	}
}

// linkedHolds reports whether m, as linked, holds shard s.
func linkedHolds(m *Member, s int) bool {
	return contains(m.ix.current, s) || contains(m.ix.revoking, s) || contains(m.ix.granted, s)
}

// isBlocked reports whether shard s is in a live member's target while
// another member holds it (docs/protocol.md §6.1 blocked sets, with the
// granted sets added; see holdings in ownership.go).
func (x *index) isBlocked(s int) bool {
	o := x.owner[s]
	if o == nil {
		return false
	}
	others := x.held[s]
	if linkedHolds(o, s) {
		others--
	}
	return others > 0
}

// heldByOthers reports whether a member other than m holds shard s.
func (x *index) heldByOthers(m *Member, s int) bool {
	if s < 0 || s >= len(x.held) {
		return false
	}
	others := x.held[s]
	if linkedHolds(m, s) {
		others--
	}
	return others > 0
}

// Counts is how many members of a group are in each state and how many
// shards they are revoking, for metrics.
type Counts struct {
	ByState  map[protocol.MemberState]int
	Revoking int
}

// Counts returns the group's member counts in O(states), from the index.
func (g *Group) Counts() Counts {
	x := g.index()
	c := Counts{ByState: make(map[protocol.MemberState]int, len(x.byState)), Revoking: x.revoking}
	for st, n := range x.byState {
		c.ByState[st] = n
	}
	return c
}
