package assign

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestIncrementalAssignAgrees compares the incremental assignor with
// stickyAssign on random clean layouts: members with random loads that
// cover every readable shard, a few with nothing (joiners), some no longer
// live with their target still there (a leave, an expiry), draining
// shards sometimes. Wherever incrementalAssign applies, the targets it
// yields are exactly stickyAssign's; it applies whenever every free shard
// is in a dead target.
func TestIncrementalAssignAgrees(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	applied, withDead := 0, 0
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
		// holding nothing; in half the trials some members are no longer
		// live, and a few trials leave a shard in no target at all.
		owners := make([]int, len(readable))
		for k := range owners {
			owners[k] = rng.IntN(len(ids))
			if rng.IntN(3) == 0 {
				owners[k] = rng.IntN(max(1, len(ids)/3))
			}
		}
		dead := map[string]bool{}
		if trial%2 == 1 {
			for _, id := range ids[1:] {
				if rng.IntN(4) == 0 {
					dead[id] = true
				}
			}
		}
		stray := trial%10 == 9 && len(readable) > 0
		var live []string
		for i, id := range ids {
			m := &Member{ID: id, State: protocol.MemberActive}
			if dead[id] {
				m.State = []protocol.MemberState{protocol.MemberLeaving, protocol.MemberExpired}[rng.IntN(2)]
			} else {
				live = append(live, id)
			}
			g.Members[id] = m
			g.Target[id] = []int{}
			for k, s := range readable {
				if owners[k] == i && !(stray && k == 0) {
					g.Target[id] = append(g.Target[id], s)
				}
			}
		}
		want := stickyAssign(live, g.Target, readable)
		moves, dropped, ok := incrementalAssign(g)
		if stray {
			if ok {
				t.Fatalf("trial %d: applied with shard %d in no target", trial, readable[0])
			}
			continue
		}
		if !ok {
			t.Fatalf("trial %d: a clean layout was refused (dead %v)", trial, dead)
		}
		applied++
		if len(dead) > 0 {
			withDead++
		}
		var gotDropped []string
		for _, m := range dropped {
			gotDropped = append(gotDropped, m.ID)
		}
		var wantDropped []string
		for _, id := range ids {
			if dead[id] {
				wantDropped = append(wantDropped, id)
			}
		}
		if !slices.Equal(gotDropped, wantDropped) {
			t.Fatalf("trial %d: dropped %v, want %v", trial, gotDropped, wantDropped)
		}
		got := map[string][]int{}
		for _, id := range live {
			got[id] = g.Target[id]
		}
		for m, s := range moves {
			if dead[m.ID] {
				t.Fatalf("trial %d: a target for %s, which is not live", trial, m.ID)
			}
			got[m.ID] = s
		}
		if !sameTarget(got, want) {
			t.Fatalf("trial %d: %d shards (draining %v), dead %v, targets %v:\nincremental %v\nsticky      %v",
				trial, g.ShardCount, g.DrainingShards, dead, g.Target, got, want)
		}
	}
	if applied < 2000 || withDead < 1000 {
		t.Fatalf("applied in %d trials, %d of them with dead targets: the generator drifted", applied, withDead)
	}
}

func normalize2(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// TestIncrementalAssignRefusesUnclean: whatever stickyAssign would repair
// (a free shard in no target, an overlap, an unreadable shard, a live
// member without a target) goes to stickyAssign.
func TestIncrementalAssignRefusesUnclean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		break_ func(g *Group)
	}{
		{"free shard", func(g *Group) { g.Target["b"] = g.Target["b"][1:] }},
		{"overlap", func(g *Group) { g.Target["b"] = union(g.Target["b"], g.Target["a"][:1]) }},
		{"unreadable", func(g *Group) { g.Target["b"] = append(slices.Clone(g.Target["b"]), 99) }},
		{"live member without a target", func(g *Group) { delete(g.Target, "b") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, _ := stable(t, 6, "a", "b")
			if _, _, ok := incrementalAssign(g); !ok {
				t.Fatal("refused a clean group")
			}
			tc.break_(g)
			g.idx = nil
			if _, _, ok := incrementalAssign(g); ok {
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
func joinStorm(tb testing.TB, n int) (*Group, []*simMember, time.Time) {
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
	return g, members, now
}

// TestLeaveSkipsTheWholeAssignor: a leave from a STABLE group of 2,000
// members hands out only the leaver's shards; it allocates less than a
// quarter of what one run of the whole sticky assignor over that group
// does (measured at about a twentieth), so it did not fall back to it.
func TestLeaveSkipsTheWholeAssignor(t *testing.T) {
	if testing.Short() {
		t.Skip("a join storm of 2,000 members")
	}
	const n = 2000
	g, members, now := joinStorm(t, n)
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	live := slices.Sorted(maps.Keys(g.Members))
	whole := allocated(func() { stickyAssign(live, g.Target, readableShards(g)) })
	leaver := members[n/2]
	leaver.startLeave()
	req := leaver.request()
	var res Result
	leave := allocated(func() { res = Heartbeat(g, req, now.Add(time.Millisecond), testConfig()) })
	if !res.Persist || len(res.Events.Left) != 1 {
		t.Fatalf("the leave did not take: %+v", res.Events)
	}
	if v := CheckInvariants(g); len(v) > 0 {
		t.Fatal(v)
	}
	t.Logf("leave %d B, whole assignor %d B", leave, whole)
	if leave*4 > whole {
		t.Errorf("a leave from %d members allocated %d B, the whole assignor %d B: it ran the whole assignor", n, leave, whole)
	}
}

// BenchmarkLeave times one member's leave from a STABLE group of as many
// members as shards: the step that ran the whole sticky assignor before
// the incremental one took leaves.
func BenchmarkLeave(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cfg := testConfig()
			for b.Loop() {
				b.StopTimer()
				g, members, now := joinStorm(b, n)
				members[n/2].startLeave()
				req := members[n/2].request()
				b.StartTimer()
				if res := Heartbeat(g, req, now.Add(time.Millisecond), cfg); !res.Persist {
					b.Fatal("the leave changed nothing")
				}
			}
		})
	}
}

func beat(tb testing.TB, g *Group, m *simMember, now time.Time, cfg Config) {
	req := m.request()
	res := Heartbeat(g, req, now, cfg)
	if err := m.apply(req, res.Response, now, cfg.MemberLease); err != nil {
		tb.Fatal(err)
	}
}
