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
//     readable shards that are not held out, each in at most one target;
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
			if contains(g.heldOut, s) {
				out = append(out, fmt.Sprintf("shard %d in the target of %s is held out", s, id))
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
		for i, w := range m.Withdrawn {
			if i > 0 && m.Withdrawn[i-1].Shard >= w.Shard {
				out = append(out, fmt.Sprintf("withdrawn shards of %s %v are not sorted and unique", id, m.Withdrawn))
			}
			if (!contains(m.Current, w.Shard) && !contains(m.Revoking, w.Shard)) || contains(m.Granted, w.Shard) {
				out = append(out, fmt.Sprintf("%s has shard %d withdrawn but not held outside its grant", id, w.Shard))
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
// serving path can afford after every durable step. It costs O(the named
// members' shards): who else holds, is granted or targets a shard comes
// from the group's index, which it first brings up to date with the named
// members (so an edit of a named member outside this package is seen).
// Violations it cannot see (between two unchanged members) cannot have
// been caused by the step; a periodic [CheckInvariants] audit, which shares
// nothing with the index, covers everything.
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
	x := g.index()
	for _, id := range c.Members {
		if m := g.Members[id]; m != nil {
			g.relink(m)
		}
	}
	count := func(v []int32, s int) int32 {
		if s < 0 || s >= len(v) {
			return 0
		}
		return v[s]
	}
	for _, id := range c.Members {
		m := g.Members[id]
		if m == nil {
			out = append(out, fmt.Sprintf("changed member %s is not in the group", id))
			continue
		}
		sorted := true
		for i, set := range [][]int{m.Current, m.Revoking, m.Granted, g.Target[id]} {
			if !isSet(set) {
				name := [...]string{"current", "revoking", "granted", "target"}[i]
				out = append(out, fmt.Sprintf("%s set of %s %v is not a sorted set", name, id, set))
				sorted = false
			}
		}
		if t := g.Target[id]; len(t) > 0 && !m.State.Live() {
			out = append(out, fmt.Sprintf("target of %s member %s", m.State, id))
		}
		for _, s := range g.Target[id] {
			if !readable(g, s) {
				out = append(out, fmt.Sprintf("shard %d in the target of %s is not readable", s, id))
			}
			if contains(g.heldOut, s) {
				out = append(out, fmt.Sprintf("shard %d in the target of %s is held out", s, id))
			}
			if count(x.targeted, s) > 1 {
				out = append(out, fmt.Sprintf("shard %d is in the targets of %s and another member", s, id))
			}
		}
		if !sorted {
			continue // its counts are not to be trusted; reported above
		}
		for _, s := range m.Granted {
			if count(x.granted, s) > 1 {
				out = append(out, fmt.Sprintf("shard %d is granted to %s and another member", s, id))
			} else if count(x.held, s) > 1 {
				out = append(out, fmt.Sprintf("shard %d is granted to %s while another member holds it", s, id))
			}
		}
		// A shard m holds that is granted to someone else.
		for _, s := range union(m.Current, m.Revoking) {
			if count(x.granted, s) > 0 && !contains(m.Granted, s) {
				out = append(out, fmt.Sprintf("shard %d held by %s is granted to another member", s, id))
			}
		}
	}
	return out
}
