package assign

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestSetOps checks the merge-based helpers against a map model.
func TestSetOps(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	gen := func() []int {
		var s []int
		for i := rng.IntN(12); i > 0; i-- {
			s = append(s, rng.IntN(15))
		}
		return normalize(s)
	}
	model := func(a, b []int, keep func(inA, inB bool) bool) []int {
		in := map[int][2]bool{}
		for _, x := range a {
			v := in[x]
			v[0] = true
			in[x] = v
		}
		for _, x := range b {
			v := in[x]
			v[1] = true
			in[x] = v
		}
		out := []int{}
		for x, v := range in {
			if keep(v[0], v[1]) {
				out = append(out, x)
			}
		}
		slices.Sort(out)
		return out
	}
	for i := 0; i < 2000; i++ {
		a, b := gen(), gen()
		cases := []struct {
			name string
			got  []int
			want []int
		}{
			{"union", union(a, b), model(a, b, func(x, y bool) bool { return x || y })},
			{"intersect", intersect(a, b), model(a, b, func(x, y bool) bool { return x && y })},
			{"minus", minus(a, b), model(a, b, func(x, y bool) bool { return x && !y })},
		}
		for _, c := range cases {
			if !equalSets(c.got, c.want) || !isSet(c.got) {
				t.Fatalf("%s(%v, %v) = %v, want %v", c.name, a, b, c.got, c.want)
			}
		}
		if subset(a, b) != (len(minus(a, b)) == 0) {
			t.Fatalf("subset(%v, %v) = %v", a, b, subset(a, b))
		}
		if subsetOfAny(a, b) != subset(a, b) {
			t.Fatalf("subsetOfAny(%v, %v)", a, b)
		}
		for _, x := range a {
			if !contains(a, x) {
				t.Fatalf("contains(%v, %d)", a, x)
			}
		}
	}
}

func TestWireHelpers(t *testing.T) {
	t.Parallel()
	w := protocol.Shards([]int{3, 1, 3})
	if got := fromWire(w); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("fromWire = %v", got)
	}
	if got := toWire(nil); got == nil || len(got) != 0 {
		t.Errorf("toWire(nil) = %#v", got)
	}
	if !sameAsWire([]int{1, 2}, protocol.Shards([]int{1, 2})) || sameAsWire([]int{1, 2}, protocol.Shards([]int{2, 1})) ||
		sameAsWire(nil, protocol.Shards([]int{1})) || !sameAsWire(nil, nil) {
		t.Error("sameAsWire")
	}
	if got := span(3, []int{1, 5, 7}); !slices.Equal(got, []int{0, 1, 2, 5, 7}) {
		t.Errorf("span = %v", got)
	}
	if got := span(-1, nil); len(got) != 0 {
		t.Errorf("span(-1) = %v", got)
	}
	// Results never alias the inputs.
	a := []int{1, 2}
	if u := union(a, nil); &u[0] == &a[0] {
		t.Error("union aliases its input")
	}
}
