package assign

import (
	"slices"

	"github.com/rscoord/rscoord/client/protocol"
)

// Shard sets are []int sorted ascending without duplicates. Every helper
// here returns a fresh slice (never one of its arguments), so a result can
// be stored in the group without aliasing a caller's slice. nil and empty
// mean the same set; wire conversion turns both into [].

// normalize returns the set of shards in s: sorted and de-duplicated, in a
// new slice. Member reports arrive in any order and may repeat a shard.
func normalize(s []int) []int {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// fromWire returns the set of shard indexes of wire shards.
func fromWire(shards []protocol.Shard) []int {
	out := make([]int, len(shards))
	for i, s := range shards {
		out[i] = s.ShardIndex
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// toWire turns a set into wire shards; never nil, because clients crash on
// null arrays.
func toWire(s []int) []protocol.Shard {
	return protocol.Shards(s)
}

// contains reports whether set s holds x.
func contains(s []int, x int) bool {
	_, ok := slices.BinarySearch(s, x)
	return ok
}

// equalSets reports whether a and b hold the same shards.
func equalSets(a, b []int) bool {
	return slices.Equal(a, b)
}

// union returns a ∪ b.
func union(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// intersect returns a ∩ b.
func intersect(a, b []int) []int {
	out := []int{}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// minus returns a − b.
func minus(a, b []int) []int {
	out := make([]int, 0, len(a))
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			continue
		}
		out = append(out, x)
	}
	return out
}

// subset reports whether every shard of a is in b.
func subset(a, b []int) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
	}
	return true
}

// subsetOfAny reports whether every shard of a lies in at least one of sets.
// It allocates nothing, which keeps the steady heartbeat cheap.
func subsetOfAny(a []int, sets ...[]int) bool {
	for _, x := range a {
		found := false
		for _, s := range sets {
			if contains(s, x) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// isSet reports whether s is sorted ascending without duplicates.
func isSet(s []int) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}

// sameAsWire reports whether wire shards name exactly set s. It is the
// allocation-free check of a steady report; an unsorted report simply
// compares unequal and takes the slow path.
func sameAsWire(s []int, shards []protocol.Shard) bool {
	if len(s) != len(shards) {
		return false
	}
	for i, w := range shards {
		if s[i] != w.ShardIndex {
			return false
		}
	}
	return true
}

// span returns a sorted copy of 0..n-1 ∪ extra (extra already a set).
func span(n int, extra []int) []int {
	if n < 0 {
		n = 0
	}
	out := make([]int, 0, n+len(extra))
	for i := 0; i < n; i++ {
		out = append(out, i)
	}
	for _, x := range extra {
		if x >= n {
			out = append(out, x)
		}
	}
	return out
}
