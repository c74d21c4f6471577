package assign

import (
	"slices"
)

// incrementalAssign computes what [stickyAssign] would change in g's
// target, in O(classes + moved shards + the members that move them)
// instead of O(members·log members + shards): the join storm's case. It
// applies when the targets are clean (only live members have one, they
// are readable and pairwise disjoint) and every readable shard is in a
// live target, so that step 1 of stickyAssign keeps every target as it is
// and step 2 has nothing to give; only step 3, balancing to quotas, can
// move shards. It returns the new targets of the members whose target
// changes, or ok false when it does not apply (the caller then runs
// stickyAssign).
//
// Step 3 by load classes: with n live members and S shards the quotas are
// q = S/n and q+1, the q+1 going to the S mod n members first in (load
// descending, id ascending) order. The index keeps the live members by
// target size, each class sorted by id, so a member's rank is the size of
// the classes above it plus its position in its own, and the members
// above and below their quota are ranges of classes. As in stickyAssign,
// members above their quota shed their highest shards and members below
// it take them, lowest first, in id order.
func incrementalAssign(g *Group) (moves map[*Member][]int, ok bool) {
	x := g.index()
	n := x.live
	total := g.ShardCount + len(g.DrainingShards)
	if n == 0 || x.overlap != 0 || x.unreadable != 0 || x.deadTargets != 0 || x.noTarget != 0 || x.liveLoad != total {
		return nil, false
	}
	q, r := total/n, total%n
	loads := make([]int, 0, len(x.classes))
	for l := range x.classes {
		loads = append(loads, l)
	}
	slices.Sort(loads)
	slices.Reverse(loads)

	// Members above their quota shed their highest shards into pool;
	// members below it are listed per class, as id-sorted ranges, with
	// what each lacks.
	type short struct {
		members []*Member // sorted by id
		lack    func(i int) int
	}
	var pool []int
	var shorts []short
	shed := map[*Member]int{}
	above := 0
	for _, l := range loads {
		c := x.classes[l]
		// Positions p < cut have rank above+p < r: quota q+1.
		cut := min(max(r-above, 0), len(c))
		quota := func(p int) int {
			if p < cut {
				return q + 1
			}
			return q
		}
		switch {
		case l > q+1:
			for p, m := range c {
				shed[m] = l - quota(p)
			}
		case l == q+1:
			for _, m := range c[cut:] {
				shed[m] = 1
			}
		case l == q:
			if cut > 0 {
				shorts = append(shorts, short{members: c[:cut], lack: func(int) int { return 1 }})
			}
		default: // l < q
			shorts = append(shorts, short{members: c, lack: func(p int) int { return quota(p) - l }})
		}
		above += len(c)
	}
	if len(shed) == 0 {
		return map[*Member][]int{}, true
	}
	moves = make(map[*Member][]int, 2*len(shed))
	for m, k := range shed {
		t := g.Target[m.ID]
		moves[m] = slices.Clone(t[:len(t)-k])
		pool = append(pool, t[len(t)-k:]...)
	}
	slices.Sort(pool)
	// Hand the pool out in id order over every short member: a merge of
	// the id-sorted ranges.
	pos := make([]int, len(shorts))
	for next := 0; next < len(pool); {
		best := -1
		for i, s := range shorts {
			if pos[i] < len(s.members) && (best < 0 || s.members[pos[i]].ID < shorts[best].members[pos[best]].ID) {
				best = i
			}
		}
		if best < 0 {
			return nil, false // cannot happen: Σ lack = Σ shed
		}
		s := shorts[best]
		m, k := s.members[pos[best]], s.lack(pos[best])
		pos[best]++
		k = min(k, len(pool)-next)
		moves[m] = union(g.Target[m.ID], pool[next:next+k])
		next += k
	}
	return moves, true
}
