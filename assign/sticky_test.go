package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// slowAssign is docs/protocol.md §6.2 read literally, one shard at a time, in
// O(S·N) or worse: keep, hand out free shards to the least loaded, then
// move one shard at a time from the most to the least loaded member.
func slowAssign(members []string, prev map[string][]int, readable []int) map[string][]int {
	out := map[string][]int{}
	if len(members) == 0 {
		return out
	}
	isReadable := map[int]bool{}
	for _, s := range readable {
		isReadable[s] = true
	}
	owner := map[int]string{}
	for _, id := range members {
		for _, s := range prev[id] {
			if isReadable[s] && owner[s] == "" {
				owner[s] = id
			}
		}
	}
	load := func(id string) int {
		n := 0
		for _, o := range owner {
			if o == id {
				n++
			}
		}
		return n
	}
	for _, s := range readable {
		if owner[s] != "" {
			continue
		}
		best := members[0]
		for _, id := range members[1:] {
			if load(id) < load(best) {
				best = id
			}
		}
		owner[s] = best
	}
	for {
		hi, lo := members[0], members[0]
		for _, id := range members[1:] {
			if load(id) > load(hi) {
				hi = id
			}
			if load(id) < load(lo) {
				lo = id
			}
		}
		if load(hi)-load(lo) <= 1 {
			break
		}
		top := -1
		for s, o := range owner {
			if o == hi && s > top {
				top = s
			}
		}
		owner[top] = lo
	}
	for _, id := range members {
		out[id] = []int{}
	}
	for s, o := range owner {
		out[o] = append(out[o], s)
	}
	for id := range out {
		sort.Ints(out[id])
	}
	return out
}

// moves counts shards that a live previous owner kept before and lost now:
// the hand-offs an assignment causes.
func moves(members []string, prev, next map[string][]int, readable []int) int {
	taken := map[int]bool{}
	n := 0
	for _, id := range members {
		for _, s := range prev[id] {
			if !contains(readable, s) || taken[s] {
				continue
			}
			taken[s] = true
			if !contains(next[id], s) {
				n++
			}
		}
	}
	return n
}

// minMoves is the fewest hand-offs any balanced assignment needs: members
// end at q or q+1 shards, the r = S mod N most loaded at q+1.
func minMoves(members []string, prev map[string][]int, readable []int) int {
	if len(members) == 0 {
		return 0
	}
	taken := map[int]bool{}
	var kept []int
	for _, id := range members {
		k := 0
		for _, s := range prev[id] {
			if contains(readable, s) && !taken[s] {
				taken[s] = true
				k++
			}
		}
		kept = append(kept, k)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(kept)))
	q, r := len(readable)/len(members), len(readable)%len(members)
	n := 0
	for i, k := range kept {
		quota := q
		if i < r {
			quota++
		}
		n += max(0, k-quota)
	}
	return n
}

// checkAssignment checks the shape every assignment must have.
func checkAssignment(members []string, readable []int, got map[string][]int) error {
	if len(got) != len(members) {
		return fmt.Errorf("%d members in the result, want %d", len(got), len(members))
	}
	seen := map[int]string{}
	lo, hi := len(readable)+1, -1
	for _, id := range members {
		t, ok := got[id]
		if !ok || t == nil {
			return fmt.Errorf("member %s missing or nil", id)
		}
		if !isSet(t) {
			return fmt.Errorf("%s: %v is not a sorted set", id, t)
		}
		for _, s := range t {
			if !contains(readable, s) {
				return fmt.Errorf("%s got unreadable shard %d", id, s)
			}
			if o, dup := seen[s]; dup {
				return fmt.Errorf("shard %d given to %s and %s", s, o, id)
			}
			seen[s] = id
		}
		lo, hi = min(lo, len(t)), max(hi, len(t))
	}
	if len(members) > 0 && len(seen) != len(readable) {
		return fmt.Errorf("%d of %d shards assigned", len(seen), len(readable))
	}
	if len(members) > 0 && hi-lo > 1 {
		return fmt.Errorf("spread %d", hi-lo)
	}
	return nil
}

func TestStickyExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		members  []string
		prev     map[string][]int
		readable []int
		want     map[string][]int
	}{
		{"no members", nil, nil, span(3, nil), map[string][]int{}},
		{"no shards", []string{"a", "b"}, nil, nil, map[string][]int{"a": {}, "b": {}}},
		{"fresh round robin by load then id", []string{"a", "b", "c"}, nil, span(5, nil),
			map[string][]int{"a": {0, 3}, "b": {1, 4}, "c": {2}}},
		{"keeps everything when balanced", []string{"a", "b"}, map[string][]int{"a": {1, 3}, "b": {0, 2}}, span(4, nil),
			map[string][]int{"a": {1, 3}, "b": {0, 2}}},
		{"newcomer takes the highest shards of the most loaded", []string{"a", "b", "c"},
			map[string][]int{"a": {0, 1, 2}, "b": {3, 4, 5}}, span(6, nil),
			map[string][]int{"a": {0, 1}, "b": {3, 4}, "c": {2, 5}}},
		{"a leaver's shards go to the least loaded", []string{"a", "c"},
			map[string][]int{"a": {0, 1}, "b": {3, 4}, "c": {2, 5}}, span(6, nil),
			map[string][]int{"a": {0, 1, 3}, "c": {2, 4, 5}}},
		{"unreadable shards dropped, draining kept", []string{"a"}, map[string][]int{"a": {0, 5, 9}}, span(2, []int{9}),
			map[string][]int{"a": {0, 1, 9}}},
		{"a shard listed twice stays with the first id", []string{"a", "b"}, map[string][]int{"a": {0}, "b": {0, 1}}, span(2, nil),
			map[string][]int{"a": {0}, "b": {1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := stickyAssign(tc.members, tc.prev, tc.readable)
			if !sameTarget(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if err := checkAssignment(tc.members, tc.readable, got); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStickyMatchesSlow compares the fast assignor with the slow literal one
// on random inputs: same balance, same number of hand-offs, and that number
// is the minimum.
func TestStickyMatchesSlow(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 500; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		n := rng.IntN(9)
		var members []string
		for i := 0; i < n; i++ {
			members = append(members, fmt.Sprintf("m%02d", i))
		}
		count := rng.IntN(40)
		var draining []int
		for s := count; s < count+rng.IntN(5); s++ {
			if rng.IntN(2) == 0 {
				draining = append(draining, s)
			}
		}
		readable := span(count, draining)
		prev := map[string][]int{}
		for i := 0; i < n+2; i++ { // some previous owners are gone
			id := fmt.Sprintf("m%02d", i)
			var s []int
			for k := rng.IntN(count + 5); k > 0; k-- {
				s = append(s, rng.IntN(count+6))
			}
			prev[id] = normalize(s)
		}
		fast := stickyAssign(members, prev, readable)
		slow := slowAssign(members, prev, readable)
		if err := checkAssignment(members, readable, fast); err != nil {
			t.Fatalf("seed %d: fast: %v", seed, err)
		}
		if err := checkAssignment(members, readable, slow); err != nil {
			t.Fatalf("seed %d: slow: %v", seed, err)
		}
		mf, ms, opt := moves(members, prev, fast, readable), moves(members, prev, slow, readable), minMoves(members, prev, readable)
		if mf != ms || mf != opt {
			t.Fatalf("seed %d: moves fast %d slow %d minimum %d\nprev %v\nfast %v\nslow %v", seed, mf, ms, opt, prev, fast, slow)
		}
		// Deterministic: same input, same output.
		if again := stickyAssign(members, prev, readable); !sameTarget(again, fast) {
			t.Fatalf("seed %d: not deterministic", seed)
		}
	}
}

// balanced returns an even assignment of shards to n members named m00000….
func balanced(n, shards int) ([]string, map[string][]int) {
	members := make([]string, n)
	for i := range members {
		members[i] = fmt.Sprintf("m%05d", i)
	}
	return members, stickyAssign(members, nil, span(shards, nil))
}

func BenchmarkStickyAssign(b *testing.B) {
	const members, shards = 10_000, 100_000
	ids, even := balanced(members, shards)
	readable := span(shards, nil)
	joined := append(slices.Clone(ids), "zzz-new")
	cases := []struct {
		name    string
		members []string
		prev    map[string][]int
	}{
		{"fresh", ids, nil},
		{"steady", ids, even},
		{"join", joined, even},
		{"leave", ids[1:], even},
	}
	for _, tc := range cases {
		b.Run(fmt.Sprintf("%s/%dx%d", tc.name, shards, members), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				stickyAssign(tc.members, tc.prev, readable)
			}
		})
	}
}

// TestStickyLargeIsFast keeps the 100,000 × 10,000 case honest in every test
// run: a quadratic assignor would take minutes here.
func TestStickyLargeIsFast(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("large")
	}
	ids, even := balanced(10_000, 100_000)
	readable := span(100_000, nil)
	got := stickyAssign(append(slices.Clone(ids), "zzz-new"), even, readable)
	if n := len(got["zzz-new"]); n != 9 && n != 10 {
		t.Errorf("newcomer got %d shards", n)
	}
	if m := moves(ids, even, got, readable); m != len(got["zzz-new"]) {
		t.Errorf("join moved %d shards for a newcomer taking %d", m, len(got["zzz-new"]))
	}
}
