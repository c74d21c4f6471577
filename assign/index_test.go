package assign

import (
	"fmt"
	"maps"
	"slices"
)

// indexMismatch compares g's index, when built, with counts taken from the
// members directly; it describes the first difference, or returns "".
func indexMismatch(g *Group) string {
	x := g.idx
	if x == nil {
		return ""
	}
	size := len(x.held)
	held, granted, targeted := make([]int32, size), make([]int32, size), make([]int32, size)
	live, unsettled, revoking := 0, 0, 0
	byState := map[string]int{}
	for id, m := range g.Members {
		if !m.ix.in {
			return fmt.Sprintf("member %s is not linked", id)
		}
		for _, s := range union(union(m.Current, m.Revoking), m.Granted) {
			if s >= size {
				return fmt.Sprintf("shard %d of %s beyond the index", s, id)
			}
			held[s]++
		}
		for _, s := range m.Granted {
			granted[s]++
		}
		for _, s := range g.Target[id] {
			if s >= size {
				return fmt.Sprintf("target shard %d of %s beyond the index", s, id)
			}
			targeted[s]++
			if m.State.Live() && x.owner[s] == nil {
				return fmt.Sprintf("shard %d of live %s has no owner", s, id)
			}
		}
		if m.State.Live() {
			live++
			if !equalSets(m.Current, g.Target[id]) {
				unsettled++
			}
		}
		byState[string(m.State)]++
		revoking += len(m.Revoking)
	}
	blocked := 0
	for s := range size {
		if o := x.owner[s]; o != nil && (g.Members[o.ID] != o || !o.State.Live() || !contains(g.Target[o.ID], s)) {
			return fmt.Sprintf("shard %d owned by %s, which does not target it live", s, o.ID)
		}
		if x.isBlocked(s) {
			blocked++
		}
	}
	got := map[string]int{}
	for st, n := range x.byState {
		got[string(st)] = n
	}
	switch {
	case !slices.Equal(held, x.held):
		return fmt.Sprintf("held %v, index %v", held, x.held)
	case !slices.Equal(granted, x.granted):
		return fmt.Sprintf("granted %v, index %v", granted, x.granted)
	case !slices.Equal(targeted, x.targeted):
		return fmt.Sprintf("targeted %v, index %v", targeted, x.targeted)
	case live != x.live || unsettled != x.unsettled || revoking != x.revoking || blocked != x.blocked:
		return fmt.Sprintf("live %d unsettled %d revoking %d blocked %d, index %d %d %d %d",
			live, unsettled, revoking, blocked, x.live, x.unsettled, x.revoking, x.blocked)
	case !maps.Equal(byState, got):
		return fmt.Sprintf("by state %v, index %v", byState, got)
	}
	return ""
}
