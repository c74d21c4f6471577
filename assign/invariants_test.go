package assign

import (
	"slices"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestCheckInvariants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		break_ func(g *Group)
		want   string // substring of a violation; "" = none
	}{
		{"healthy", func(g *Group) {}, ""},
		{"shard in two targets", func(g *Group) { g.Target["b"] = []int{2, 3, 4, 5} }, "in the targets of a and b"},
		{"target of unknown member", func(g *Group) { g.Target["ghost"] = []int{} }, "target of unknown member ghost"},
		{"target of expired member", func(g *Group) { g.Members["b"].State = protocol.MemberExpired }, "target of EXPIRED member b"},
		{"unreadable target shard", func(g *Group) { g.Target["b"] = []int{3, 4, 5, 6} }, "shard 6 in the target of b is not readable"},
		{"draining shard is readable", func(g *Group) { g.DrainingShards = []int{6}; g.Target["b"] = []int{3, 4, 5, 6} }, ""},
		{"granted while another holds", func(g *Group) { g.Members["a"].Granted = []int{0, 1, 2, 3} }, "shard 3 is granted to a while b holds it"},
		{"granted to two", func(g *Group) {
			g.Members["a"].Granted = []int{0, 1, 2, 3}
			g.Members["b"].Current = []int{4, 5}
		}, "shard 3 is granted to a and b"},
		{"granted while a leaver revokes", func(g *Group) {
			g.Members["b"].State = protocol.MemberLeaving
			g.Members["b"].Current, g.Members["b"].Granted, g.Members["b"].Revoking = nil, nil, []int{3}
			delete(g.Target, "b")
			g.Members["a"].Granted = []int{0, 1, 2, 3}
		}, "shard 3 is granted to a while b holds it"},
		{"a fenced member still holding counts", func(g *Group) {
			g.Members["b"].State = protocol.MemberFenced
			delete(g.Target, "b")
			g.Members["a"].Granted = []int{0, 1, 2, 3}
		}, "shard 3 is granted to a while b holds it"},
		{"released members do not count", func(g *Group) {
			b := g.Members["b"]
			b.State = protocol.MemberFenced
			b.Current, b.Revoking, b.Granted = nil, nil, nil
			delete(g.Target, "b")
			g.Members["a"].Granted = []int{0, 1, 2, 3}
		}, ""},
		{"unsorted set", func(g *Group) { g.Members["a"].Current = []int{2, 1} }, "current set of a [2 1] is not a sorted set"},
		{"duplicate in a set", func(g *Group) { g.Members["b"].Revoking = []int{7, 7} }, "revoking set of b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _, _ := stable(t, 6, "a", "b")
			tc.break_(g)
			got := CheckInvariants(g)
			if got == nil {
				t.Fatal("nil slice")
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Errorf("violations %v", got)
				}
				return
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("violations %v, want one containing %q", got, tc.want)
			}
			if a := g.Assignments(); len(a.InvariantViolations) != len(got) {
				t.Errorf("Assignments shows %v", a.InvariantViolations)
			}
		})
	}
}

// TestCheckChangedAgreesWithTheFullCheck breaks one member of a stable
// group at a time: the check of what changed finds every violation the full
// check finds, as long as the broken member is named.
func TestCheckChangedAgreesWithTheFullCheck(t *testing.T) {
	t.Parallel()
	breaks := []func(g *Group) string{
		func(g *Group) string { g.Members["a"].Granted = []int{0, 1, 2, 3}; return "a" },
		func(g *Group) string { g.Members["b"].Current = []int{3, 1}; return "b" },
		func(g *Group) string { g.Target["a"] = append(g.Target["a"], 99); return "a" },
		func(g *Group) string {
			g.Members["b"].State = protocol.MemberFenced
			g.Members["a"].Granted = []int{0, 1, 2, 3}
			return "a"
		},
		func(g *Group) string { // a shard beyond the layout, held twice
			g.Members["a"].Granted = append(slices.Clone(g.Members["a"].Granted), 50)
			g.Members["b"].Current = append(slices.Clone(g.Members["b"].Current), 50)
			return "a,b" // both changed: the step names both
		},
	}
	for i, br := range breaks {
		g, _, _ := stable(t, 6, "a", "b")
		if v := CheckChanged(g, Changes{Group: true, Members: []string{"a", "b"}}); len(v) != 0 {
			t.Fatalf("case %d: violations before breaking: %v", i, v)
		}
		id := br(g)
		full, changed := CheckInvariants(g), CheckChanged(g, Changes{Members: strings.Split(id, ",")})
		if len(full) == 0 || len(changed) == 0 {
			t.Errorf("case %d: full %v, changed-only %v", i, full, changed)
		}
	}
}

// BenchmarkCheckChanged is the serving path's check after one durable step
// of a join into a STABLE group of 1,000 members.
func BenchmarkCheckChanged(b *testing.B) {
	g, _ := stableGroup(b, 1000, 1000)
	c := Changes{Group: true, Members: []string{"m00000", "m00500"}}
	b.ReportAllocs()
	for b.Loop() {
		if v := CheckChanged(g, c); len(v) != 0 {
			b.Fatal(v)
		}
	}
}
