package assign

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestIncrementalAssignAgrees compares the incremental assignor with
// stickyAssign on random clean layouts: members with random loads that
// cover every readable shard, a few with nothing (joiners), draining
// shards sometimes. Wherever incrementalAssign applies, the targets it
// yields are exactly stickyAssign's.
func TestIncrementalAssignAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	applied := 0
	for trial := range 3000 {
		g := NewGroup("orders", "billing", rng.IntN(120), t0)
		if rng.IntN(4) == 0 {
			for s := g.ShardCount; s < g.ShardCount+rng.IntN(5); s++ {
				g.DrainingShards = append(g.DrainingShards, s+rng.IntN(3))
			}
			g.DrainingShards = normalize(g.DrainingShards)
		}
		n := 1 + rng.IntN(40)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("m%03d", rng.IntN(1000))
		}
		ids = normalize2(ids)
		readable := readableShards(g)
		// A random split of the readable shards, skewed, with some members
		// holding nothing.
		owners := make([]int, len(readable))
		for k := range owners {
			owners[k] = rng.IntN(len(ids))
			if rng.IntN(3) == 0 {
				owners[k] = rng.IntN(max(1, len(ids)/3))
			}
		}
		for i, id := range ids {
			g.Members[id] = &Member{ID: id, State: protocol.MemberActive}
			g.Target[id] = []int{}
			for k, s := range readable {
				if owners[k] == i {
					g.Target[id] = append(g.Target[id], s)
				}
			}
		}
		want := stickyAssign(ids, g.Target, readable)
		moves, ok := incrementalAssign(g)
		if !ok {
			t.Fatalf("trial %d: a clean layout was refused", trial)
		}
		applied++
		got := map[string][]int{}
		for id, s := range g.Target {
			got[id] = s
		}
		for m, s := range moves {
			got[m.ID] = s
		}
		if !sameTarget(got, want) {
			t.Fatalf("trial %d: %d shards (draining %v), targets %v:\nincremental %v\nsticky      %v",
				trial, g.ShardCount, g.DrainingShards, g.Target, got, want)
		}
	}
	if applied == 0 {
		t.Fatal("never applied")
	}
}

func normalize2(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// TestIncrementalAssignRefusesUnclean: whatever stickyAssign would repair
// (a free shard, a target of a member that is not live, an overlap) goes
// to stickyAssign.
func TestIncrementalAssignRefusesUnclean(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(g *Group)
	}{
		{"free shard", func(g *Group) { g.Target["b"] = g.Target["b"][1:] }},
		{"expired member's target", func(g *Group) { g.Members["b"].State = protocol.MemberExpired }},
		{"overlap", func(g *Group) { g.Target["b"] = union(g.Target["b"], g.Target["a"][:1]) }},
		{"unreadable", func(g *Group) { g.Target["b"] = append(slices.Clone(g.Target["b"]), 99) }},
		{"live member without a target", func(g *Group) { delete(g.Target, "b") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, _ := stable(t, 6, "a", "b")
			if _, ok := incrementalAssign(g); !ok {
				t.Fatal("refused a clean group")
			}
			tc.break_(g)
			g.idx = nil
			if _, ok := incrementalAssign(g); ok {
				t.Error("applied")
			}
		})
	}
}

// TestJoinStormCostsLinear is the regression test of the join storm: N
// members join a group of N shards one by one, each heartbeats until the
// group is STABLE, and the bytes the whole storm allocates per member must
// not grow with N (measured at N and 4N). Allocations, not wall time: they
// do not depend on the machine's load. A step that costs O(members) or
// O(shards) per heartbeat (a sort of every id, a whole new target, a
// rebuilt index) makes the bytes per member grow about fourfold.
func TestJoinStormCostsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("join storms of 2,000 members")
	}
	perMember := func(n int) (bytes, allocs float64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		joinStorm(t, n)
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / float64(n), float64(after.Mallocs-before.Mallocs) / float64(n)
	}
	smallBytes, smallAllocs := perMember(500)
	largeBytes, largeAllocs := perMember(2000)
	t.Logf("per member: %.0f B in %.0f allocations at 500 members, %.0f B in %.0f at 2,000",
		smallBytes, smallAllocs, largeBytes, largeAllocs)
	if largeBytes > 2*smallBytes || largeAllocs > 2*smallAllocs {
		t.Errorf("a join storm of 2,000 members allocates %.0f B (%.0f times) per member, of 500 %.0f B (%.0f): not linear",
			largeBytes, largeAllocs, smallBytes, smallAllocs)
	}
}

// joinStorm joins n members into a group of n shards and heartbeats them
// round-robin, as members do, until the group is STABLE.
func joinStorm(tb testing.TB, n int) {
	cfg := testConfig()
	g := NewGroup("orders", "billing", n, t0)
	Restore(g, t0, cfg)
	members := make([]*simMember, n)
	now := t0
	for i := range members {
		members[i] = newSimMember(fmt.Sprintf("m%05d", i))
		now = now.Add(time.Millisecond)
		beat(tb, g, members[i], now, cfg)
	}
	for sweep := 0; g.State != protocol.GroupStable; sweep++ {
		if sweep == 20 {
			tb.Fatalf("%d members: not STABLE after 20 sweeps", n)
		}
		for _, m := range members {
			now = now.Add(time.Millisecond)
			beat(tb, g, m, now, cfg)
		}
	}
	if v := CheckInvariants(g); len(v) > 0 {
		tb.Fatal(v)
	}
}

func beat(tb testing.TB, g *Group, m *simMember, now time.Time, cfg Config) {
	req := m.request()
	res := Heartbeat(g, req, now, cfg)
	if err := m.apply(req, res.Response, now, cfg.MemberLease); err != nil {
		tb.Fatal(err)
	}
}
