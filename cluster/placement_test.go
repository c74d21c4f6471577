package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func replicas(ids ...string) []Replica {
	out := make([]Replica, len(ids))
	for i, id := range ids {
		out[i] = Replica{ID: id, AdvertiseURL: "http://" + id}
	}
	return out
}

func units(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("group/orders/g%03d", i)
	}
	return out
}

func TestOwnerIsDeterministicAndOrderFree(t *testing.T) {
	a, b := replicas("r1", "r2", "r3"), replicas("r3", "r1", "r2")
	for _, u := range units(200) {
		x, ok1 := Owner(u, a)
		y, ok2 := Owner(u, b)
		if !ok1 || !ok2 || x != y {
			t.Fatalf("%s: owner %v (%v) vs %v (%v)", u, x, ok1, y, ok2)
		}
	}
	if _, ok := Owner("group/x/y", nil); ok {
		t.Fatal("owner found among no replicas")
	}
}

func TestOwnerMovesOnlyTheUnitsOfALostReplicaAndSpreads(t *testing.T) {
	all := replicas("r1", "r2", "r3")
	count := map[string]int{}
	us := units(3000)
	for _, u := range us {
		o, _ := Owner(u, all)
		count[o.ID]++
		after, _ := Owner(u, replicas("r1", "r3"))
		switch {
		case o.ID != "r2" && after.ID != o.ID:
			t.Fatalf("%s moved from %s to %s when r2 left", u, o.ID, after.ID)
		case after.ID == "r2":
			t.Fatalf("%s placed on the lost r2", u)
		}
	}
	for id, n := range count {
		if n < 800 || n > 1200 { // 1000 ± 20%
			t.Fatalf("replica %s owns %d of 3000 units: %v", id, n, count)
		}
	}
}

func TestPlan(t *testing.T) {
	rs := replicas("r1", "r2")
	us := units(50)
	var mine, theirs []string
	for _, u := range us {
		if o, _ := Owner(u, rs); o.ID == "r1" {
			mine = append(mine, u)
		} else {
			theirs = append(theirs, u)
		}
	}
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("degenerate split %d/%d", len(mine), len(theirs))
	}
	tests := []struct {
		name                 string
		held                 []string
		replicas             []Replica
		wantClaim, wantRelse []string
	}{
		{"nothing held", nil, rs, mine, nil},
		{"holds all of its own", mine, rs, nil, nil},
		{"holds one of the other's", append(slices.Clone(mine), theirs[0]), rs, nil, theirs[:1]},
		{"alone: claims everything", mine, replicas("r1"), theirs, nil},
		{"not live itself: releases all", mine, replicas("r2"), nil, mine},
		{"no replicas at all", mine[:1], nil, nil, mine[:1]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim, release := Plan("r1", append(us, us[:3]...), tc.held, tc.replicas)
			want := slices.Sorted(slices.Values(tc.wantClaim))
			if !slices.Equal(claim, want) {
				t.Fatalf("claim %v, want %v", claim, want)
			}
			if !slices.Equal(release, slices.Sorted(slices.Values(tc.wantRelse))) {
				t.Fatalf("release %v, want %v", release, tc.wantRelse)
			}
		})
	}
}
