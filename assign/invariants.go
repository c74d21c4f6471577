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
