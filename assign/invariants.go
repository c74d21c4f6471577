package assign

import (
	"fmt"
	"slices"
)

// CheckInvariants returns every violated invariant of g in words, or an
// empty (non-nil) slice. The monitoring endpoint shows them; tests check
// them after every step. Checked:
//
//   - every shard set of the group is sorted without duplicates;
//   - only known live members have a target, and targets hold only
//     readable shards, each in at most one target;
//   - no shard is granted to two owning members;
//   - no shard is granted to one owning member while another owning member
//     holds it (current or revoking): the one rule that keeps two members
//     from reading a shard at once.
//
// Epoch monotonicity needs history and is checked by the tests.
func CheckInvariants(g *Group) []string {
	out := []string{}
	ids := sortedIDs(g.Members)
	targetIDs := make([]string, 0, len(g.Target))
	for id := range g.Target {
		targetIDs = append(targetIDs, id)
	}
	slices.Sort(targetIDs)

	if !isSet(g.DrainingShards) {
		out = append(out, fmt.Sprintf("draining shards %v are not a sorted set", g.DrainingShards))
	}
	targetOf := map[int]string{}
	for _, id := range targetIDs {
		t := g.Target[id]
		m := g.Members[id]
		switch {
		case m == nil:
			out = append(out, fmt.Sprintf("target of unknown member %s", id))
		case !m.State.Live():
			out = append(out, fmt.Sprintf("target of %s member %s", m.State, id))
		}
		if !isSet(t) {
			out = append(out, fmt.Sprintf("target of %s %v is not a sorted set", id, t))
		}
		for _, s := range t {
			if !readable(g, s) {
				out = append(out, fmt.Sprintf("shard %d in the target of %s is not readable", s, id))
			}
			if other, ok := targetOf[s]; ok && other != id {
				out = append(out, fmt.Sprintf("shard %d is in the targets of %s and %s", s, other, id))
			}
			targetOf[s] = id
		}
	}

	holders := map[int][]string{} // shard → owning members holding it
	grantee := map[int]string{}
	for _, id := range ids {
		m := g.Members[id]
		for i, set := range [][]int{m.Current, m.Revoking, m.Granted} {
			if !isSet(set) {
				name := [...]string{"current", "revoking", "granted"}[i]
				out = append(out, fmt.Sprintf("%s set of %s %v is not a sorted set", name, id, set))
			}
		}
		for _, s := range union(m.Current, m.Revoking) {
			holders[s] = append(holders[s], id)
		}
		for _, s := range m.Granted {
			if other, ok := grantee[s]; ok {
				out = append(out, fmt.Sprintf("shard %d is granted to %s and %s", s, other, id))
			}
			grantee[s] = id
		}
	}
	for _, id := range ids {
		m := g.Members[id]
		for _, s := range m.Granted {
			for _, h := range holders[s] {
				if h != id {
					out = append(out, fmt.Sprintf("shard %d is granted to %s while %s holds it", s, id, h))
				}
			}
		}
	}
	return out
}

// CheckChanged is [CheckInvariants] restricted to what a step changed (the
// members c names, and the group-level sets when c.Group): the check the
// serving path can afford after every durable step. It costs O(members +
// shards) at most, never O(members × shards), and allocates per changed
// member only. Violations it cannot see (between two unchanged members)
// cannot have been caused by the step; a periodic [CheckInvariants] audit
// covers everything.
func CheckChanged(g *Group, c Changes) []string {
	out := []string{}
	if c.Empty() {
		return out
	}
	if c.Group && !isSet(g.DrainingShards) {
		out = append(out, fmt.Sprintf("draining shards %v are not a sorted set", g.DrainingShards))
	}
	if len(c.Members) == 0 {
		return out
	}
	// Shard → holders and target owners, over every member, in slices
	// indexed by shard: O(members + shards), no maps built, no allocation
	// per member. This runs after every durable step of a join storm, so
	// it walks each map once and each set once.
	size := g.ShardCount
	for _, s := range g.DrainingShards {
		size = max(size, s+1)
	}
	holders := make([]uint16, size) // saturating count of members holding
	grantees := make([]uint16, size)
	targets := make([]uint16, size)
	stamp := make([]int32, size) // the last member counted in holders
	fit := func(s int) bool {
		if s < 0 {
			return false
		}
		if s >= len(holders) { // a shard beyond the layout: still counted
			n := s + 1 - len(holders)
			holders = append(holders, make([]uint16, n)...)
			grantees = append(grantees, make([]uint16, n)...)
			targets = append(targets, make([]uint16, n)...)
			stamp = append(stamp, make([]int32, n)...)
		}
		return true
	}
	inc := func(v []uint16, s int) {
		if v[s] < 1<<15 {
			v[s]++
		}
	}
	var n int32
	for _, m := range g.Members {
		n++
		if !isSet(m.Current) || !isSet(m.Revoking) || !isSet(m.Granted) {
			continue // reported below if m changed, by the audit otherwise
		}
		for _, set := range [3][]int{m.Current, m.Revoking, m.Granted} {
			for _, s := range set {
				if fit(s) && stamp[s] != n {
					stamp[s] = n
					inc(holders, s)
				}
			}
		}
		for _, s := range m.Granted {
			inc(grantees, s) // fitted above
		}
	}
	for _, t := range g.Target {
		for _, s := range t {
			if fit(s) {
				inc(targets, s)
			}
		}
	}
	for _, id := range c.Members {
		m := g.Members[id]
		if m == nil {
			out = append(out, fmt.Sprintf("changed member %s is not in the group", id))
			continue
		}
		for i, set := range [][]int{m.Current, m.Revoking, m.Granted, g.Target[id]} {
			if !isSet(set) {
				name := [...]string{"current", "revoking", "granted", "target"}[i]
				out = append(out, fmt.Sprintf("%s set of %s %v is not a sorted set", name, id, set))
			}
		}
		if t := g.Target[id]; len(t) > 0 && !m.State.Live() {
			out = append(out, fmt.Sprintf("target of %s member %s", m.State, id))
		}
		for _, s := range g.Target[id] {
			if !readable(g, s) {
				out = append(out, fmt.Sprintf("shard %d in the target of %s is not readable", s, id))
			}
			if s >= 0 && s < len(targets) && targets[s] > 1 {
				out = append(out, fmt.Sprintf("shard %d is in the targets of %s and another member", s, id))
			}
		}
		for _, s := range m.Granted {
			if s < 0 || s >= len(holders) {
				continue
			}
			if grantees[s] > 1 {
				out = append(out, fmt.Sprintf("shard %d is granted to %s and another member", s, id))
			} else if holders[s] > 1 {
				out = append(out, fmt.Sprintf("shard %d is granted to %s while another member holds it", s, id))
			}
		}
		// A shard m holds that is granted to someone else.
		for _, s := range union(m.Current, m.Revoking) {
			if s >= 0 && s < len(grantees) && grantees[s] > 0 && !contains(m.Granted, s) {
				out = append(out, fmt.Sprintf("shard %d held by %s is granted to another member", s, id))
			}
		}
	}
	return out
}
