package assign

import (
	"cmp"
	"slices"
)

// stickyAssign computes the target assignment of docs/protocol.md §6.2.
//
// members are the live member ids sorted ascending, prev the previous
// target, readable the sorted readable shards. The result maps every member
// to its sorted shards ([] when it gets none) and:
//
//  1. keeps every readable shard with its previous owner when that owner is
//     still live (a shard listed under two members stays with the first id);
//  2. gives every other readable shard, in index order, to the least loaded
//     member, ties to the smallest id;
//  3. then moves shards from the most to the least loaded members until
//     max − min ≤ 1.
//
// Step 3 does not literally move one shard at a time: it computes the end
// state of that loop directly. With S shards and N members the loads end at
// q = S/N or q+1, and exactly S mod N members get q+1; those are the most
// loaded ones after step 2 (ties to the smallest id), because any other
// choice moves more shards. Members above their quota shed their highest
// shards, members below take them in member order. No member that received
// a free shard in step 2 ever sheds one (step 2 keeps it at most one above
// the minimum), so the number of moved shards is the minimum possible.
//
// Cost: O(S + U·log N + N·log N) for U free shards: one pass over the
// shards, a heap for step 2, one sort of the members. No maps but the
// result.
func stickyAssign(members []string, prev map[string][]int, readable []int) map[string][]int {
	n := len(members)
	out := make(map[string][]int, n)
	if n == 0 {
		return out
	}
	size := 0
	if len(readable) > 0 {
		size = readable[len(readable)-1] + 1
	}
	const (
		notReadable = -2
		free        = -1
	)
	owner := make([]int32, size)
	for i := range owner {
		owner[i] = notReadable
	}
	for _, s := range readable {
		owner[s] = free
	}
	load := make([]int, n)

	// Step 1: keep.
	for i, id := range members {
		for _, s := range prev[id] {
			if s >= 0 && s < size && owner[s] == free {
				owner[s] = int32(i)
				load[i]++
			}
		}
	}

	// Step 2: free shards in index order to the least loaded member.
	h := loadHeap{load: load, idx: make([]int32, n)}
	for i := range h.idx {
		h.idx[i] = int32(i)
	}
	h.init()
	for _, s := range readable {
		if owner[s] == free {
			i := h.idx[0]
			owner[s] = i
			load[i]++
			h.down(0)
		}
	}

	// Step 3: balance to quotas.
	total := len(readable)
	q, r := total/n, total%n
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(load[b], load[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	quota := make([]int, n)
	for rank, i := range order {
		quota[i] = q
		if rank < r {
			quota[i] = q + 1
		}
	}
	excess := make([]int, n)
	anyExcess := false
	for i := range load {
		if load[i] > quota[i] {
			excess[i] = load[i] - quota[i]
			anyExcess = true
		}
	}
	if anyExcess {
		// Shed the highest shards of each member above its quota: walk the
		// shards from the top.
		var pool []int
		for k := len(readable) - 1; k >= 0; k-- {
			s := readable[k]
			if i := owner[s]; excess[i] > 0 {
				excess[i]--
				load[i]--
				pool = append(pool, s)
			}
		}
		slices.Sort(pool)
		next := 0
		for i := 0; i < n && next < len(pool); i++ {
			for load[i] < quota[i] && next < len(pool) {
				owner[pool[next]] = int32(i)
				load[i]++
				next++
			}
		}
	}

	// Build the sorted lists in one pass over one backing array; the
	// three-index slices keep an append on one list from writing into the
	// next.
	backing := make([]int, total)
	start := 0
	lists := make([][]int, n)
	for i := range lists {
		lists[i] = backing[start : start : start+load[i]]
		start += load[i]
	}
	for _, s := range readable {
		i := owner[s]
		lists[i] = append(lists[i], s)
	}
	for i, id := range members {
		out[id] = lists[i]
	}
	return out
}

// loadHeap is a min-heap of member indexes ordered by (load, index); index
// order is id order because members are sorted. Hand-written rather than
// container/heap to avoid an interface call per comparison on 10^5 shards.
type loadHeap struct {
	load []int
	idx  []int32
}

func (h *loadHeap) less(a, b int) bool {
	la, lb := h.load[h.idx[a]], h.load[h.idx[b]]
	if la != lb {
		return la < lb
	}
	return h.idx[a] < h.idx[b]
}

func (h *loadHeap) init() {
	for i := len(h.idx)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *loadHeap) down(i int) {
	n := len(h.idx)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h.idx[i], h.idx[c] = h.idx[c], h.idx[i]
		i = c
	}
}
