package assign

import (
	"maps"
	"slices"
)

// incrementalAssign computes what [stickyAssign] would change in g's
// target, in O(classes + moved shards + the members that move them + the
// classes those members leave or enter) instead of O(members·log members +
// shards): the join storm's case, and a leave or an expiry in a settled
// group. It applies when the live members' targets are clean (readable,
// pairwise disjoint, one per live member) and every readable shard is in
// a live target or in the target of a member that is no longer live. Then
// step 1 of stickyAssign keeps every live target as it is, step 2 hands
// out exactly the shards of the dead targets, and step 3 balances. It
// returns the new targets of the live members whose target changes and
// the members whose dead target entry goes, or ok false when it does not
// apply (the caller then runs stickyAssign).
//
// Step 3 by load classes: with n live members and S shards the quotas are
// q = S/n and q+1, the q+1 going to the S mod n members first in (load
// descending, id ascending) order. The index keeps the live members by
// target size, each class sorted by id, so a member's rank is the size of
// the classes above it plus its position in its own, and the members
// above and below their quota are ranges of classes. As in stickyAssign,
// members above their quota shed their highest shards and members below
// it take them, lowest first, in id order.
func incrementalAssign(g *Group) (moves map[*Member][]int, dropped []*Member, ok bool) {
	x := g.index()
	n := x.live
	total := g.ShardCount + len(g.DrainingShards)
	if n == 0 || x.overlap != 0 || x.unreadable != 0 || x.noTarget != 0 {
		return nil, nil, false
	}
	free, dropped := deadTargetShards(g, x)
	if x.liveLoad+len(free) != total {
		return nil, nil, false // a free shard in no target at all
	}
	given := giveFree(x.classes, free)
	classes := x.classes
	if len(given) > 0 {
		classes = reclassify(g, x.classes, given)
	}
	// target is a live member's target after step 2.
	target := func(m *Member) []int {
		if s, ok := given[m]; ok {
			return union(g.Target[m.ID], s)
		}
		return g.Target[m.ID]
	}
	moves = make(map[*Member][]int, len(given))
	for m := range given {
		moves[m] = target(m)
	}

	q, r := total/n, total%n
	loads := make([]int, 0, len(classes))
	for l := range classes {
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
		c := classes[l]
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
		return moves, dropped, true
	}
	for m, k := range shed {
		t := target(m)
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
			return nil, nil, false // cannot happen: Σ lack = Σ shed
		}
		s := shorts[best]
		m, k := s.members[pos[best]], s.lack(pos[best])
		pos[best]++
		k = min(k, len(pool)-next)
		moves[m] = union(target(m), pool[next:next+k])
		next += k
	}
	return moves, dropped, true
}

// deadTargetShards returns the readable shards of the dead targets (see
// index.deadTargets) that no live target holds, sorted, and the members of
// those targets, sorted by id.
func deadTargetShards(g *Group, x *index) (free []int, dead []*Member) {
	if len(x.deadTargets) == 0 {
		return nil, nil
	}
	dead = slices.SortedFunc(maps.Keys(x.deadTargets), byID)
	for _, m := range dead {
		for _, s := range g.Target[m.ID] {
			if s >= 0 && s < len(x.liveTargets) && x.liveTargets[s] == 0 && readable(g, s) {
				free = append(free, s)
			}
		}
	}
	slices.Sort(free)
	return slices.Compact(free), dead
}

// giveFree is step 2 of stickyAssign over the load classes: each free
// shard, in index order, goes to the least loaded live member, ties to the
// smallest id. Everyone at the lowest load gets one, in id order, before
// anyone at the next load gets another, and those raised merge with the
// members already there, so a level is a merge of two id-sorted lists.
// It returns the shards given to each member, sorted.
func giveFree(classes map[int][]*Member, free []int) map[*Member][]int {
	given := map[*Member][]int{}
	if len(free) == 0 {
		return given
	}
	loads := slices.Sorted(maps.Keys(classes))
	level, li := loads[0], 1
	// here: the members at level from the start; raised: those raised to
	// it; next: those raised from it; all sorted by id.
	here, raised, next := classes[level], []*Member(nil), []*Member(nil)
	hi, ri := 0, 0
	for _, s := range free {
		if hi == len(here) && ri == len(raised) {
			level++
			here, raised, next = nil, next, nil
			if li < len(loads) && loads[li] == level {
				here = classes[level]
				li++
			}
			hi, ri = 0, 0
		}
		var m *Member
		if ri == len(raised) || (hi < len(here) && here[hi].ID < raised[ri].ID) {
			m, hi = here[hi], hi+1
		} else {
			m, ri = raised[ri], ri+1
		}
		given[m] = append(given[m], s)
		next = append(next, m)
	}
	return given
}

// reclassify returns the load classes after step 2 gave members shards:
// the classes the given members leave and enter are copied and edited,
// merging rather than sorting, the others shared with the index.
func reclassify(g *Group, classes map[int][]*Member, given map[*Member][]int) map[int][]*Member {
	out := maps.Clone(classes)
	from := map[int]map[*Member]bool{}
	to := map[int][]*Member{}
	for m, s := range given {
		l := len(g.Target[m.ID])
		if from[l] == nil {
			from[l] = map[*Member]bool{}
		}
		from[l][m] = true
		to[l+len(s)] = append(to[l+len(s)], m)
	}
	for l, gone := range from {
		c := slices.DeleteFunc(slices.Clone(out[l]), func(m *Member) bool { return gone[m] })
		if len(c) == 0 {
			delete(out, l)
		} else {
			out[l] = c
		}
	}
	for l, add := range to {
		slices.SortFunc(add, byID)
		out[l] = mergeByID(out[l], add)
	}
	return out
}

// mergeByID merges two id-sorted lists into a new one.
func mergeByID(a, b []*Member) []*Member {
	out := make([]*Member, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].ID < b[0].ID {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}
