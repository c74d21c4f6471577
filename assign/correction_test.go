package assign

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestCorrectionRound walks the round of docs/protocol.md §6.1 steps 4 and 9
// with two members: SYNC_METADATA, then REVOKE_PENDING while the other
// member has not synced, then OK once everyone has.
func TestCorrectionRound(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 6, "a", "b")
	a, b := cs[0], cs[1]
	v := g.MetadataVersion
	epochA := g.Members["a"].Epoch
	// a saw a version this coordinator does not have (its store went back).
	a.sim.version = v + 1
	a.sim.epoch++ // and an epoch from that lost state

	steps := []struct {
		who          *client
		status       protocol.Status
		epoch        int64
		version      int64
		wantAssigned []int
		wantPending  []int
		open         bool
	}{
		// The member keeps its stored epoch, the group moves past the
		// reported version.
		{a, protocol.StatusSyncMetadata, epochA, v + 2, []int{0, 1, 2}, []int{}, true},
		{a, protocol.StatusRevokePending, epochA, v + 2, []int{0, 1, 2}, []int{}, true},
		// b never saw the lost version, but differs from the group's now.
		{b, protocol.StatusSyncMetadata, g.Members["b"].Epoch, v + 2, []int{3, 4, 5}, []int{}, true},
		// Everyone synced, nothing blocked: the round closes on this one.
		{b, protocol.StatusOK, g.Members["b"].Epoch, v + 2, []int{3, 4, 5}, []int{}, false},
		{a, protocol.StatusOK, epochA, v + 2, []int{0, 1, 2}, []int{}, false},
	}
	for i, st := range steps {
		now = now.Add(10 * time.Millisecond)
		res := st.who.beat(now)
		r := res.Response
		if r.Status != st.status || r.MemberEpoch != st.epoch || r.MetadataVersion != st.version ||
			!slices.Equal(assigned(r), st.wantAssigned) || !slices.Equal(pending(r), st.wantPending) {
			t.Fatalf("step %d (%s): %s epoch %d version %d assigned %v pending %v; want %s %d %d %v %v", i, st.who.sim.id,
				r.Status, r.MemberEpoch, r.MetadataVersion, assigned(r), pending(r), st.status, st.epoch, st.version, st.wantAssigned, st.wantPending)
		}
		if g.CorrectionOpen != st.open {
			t.Fatalf("step %d: round open %v, want %v", i, g.CorrectionOpen, st.open)
		}
		checkNoNulls(t, r)
	}
	if g.State != protocol.GroupStable || g.MetadataVersion != v+2 {
		t.Errorf("state %s version %d", g.State, g.MetadataVersion)
	}
}

// TestCorrectionStartsNothing: during the round a member that reports less
// than its target is not told to start the rest, and a joiner starts
// nothing either.
func TestCorrectionStartsNothing(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 6, "a", "b")
	a := cs[0]
	a.sim.version += 3
	a.sim.owned = []int{0} // it let go of 1 and 2 in the lost state
	now = now.Add(time.Second)
	r := a.beat(now).Response
	if r.Status != protocol.StatusSyncMetadata || !slices.Equal(assigned(r), []int{0}) || !slices.Equal(pending(r), []int{1, 2}) {
		t.Fatalf("sync: %+v", r)
	}
	if r.HeartbeatIntervalMs != 200 {
		t.Errorf("pending shards: interval %d", r.HeartbeatIntervalMs)
	}
	c := newClient(t, g, "c")
	if r = c.beat(now).Response; r.Status != protocol.StatusRevokePending || len(assigned(r)) != 0 {
		t.Fatalf("join during the round: %+v", r)
	}
	settle(t, now, cs[0], cs[1], c)
	if g.CorrectionOpen || g.State != protocol.GroupStable {
		t.Fatalf("did not settle: open %v state %s", g.CorrectionOpen, g.State)
	}
}

// TestCorrectionIgnoresStaleAndJoins: a version below the group's, with no
// round open, is an ordinary member that missed a bump; a join carries no
// version worth correcting. (b's join is the bump a missed: a version
// below a's own join would be an earlier process's.)
func TestCorrectionIgnoresStaleAndJoins(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 4, "a", "b")
	cs[0].sim.version--
	if r := cs[0].beat(now.Add(time.Second)).Response; r.Status != protocol.StatusOK || g.CorrectionOpen {
		t.Fatalf("stale version: %+v", r)
	}
	req := joinReq("c")
	req.MetadataVersion = 1000
	if r := Heartbeat(g, req, now.Add(time.Second), testConfig()).Response; r.Status != protocol.StatusOK || g.CorrectionOpen {
		t.Fatalf("join with a high version: %+v", r)
	}
}

// TestStoreWentBack replays the failure correction exists for: the group is
// restored from a snapshot one or two metadata versions old while members
// carry newer versions and epochs (c and d joined; the restore may forget
// d). No shard is ever read by two members and the group converges; after
// losing one version no known member is fenced.
func TestStoreWentBack(t *testing.T) {
	t.Parallel()
	for _, versions := range []int64{1, 2} {
		t.Run(fmt.Sprintf("%d versions", versions), func(t *testing.T) {
			cfg := testConfig()
			g, cs, now := stable(t, 8, "a", "b")
			snaps := []*Group{cloneGroup(t, g)}
			all := cs
			for _, id := range []string{"c", "d"} {
				all = append(all, newClient(t, g, id))
				for round := 0; round < 10; round++ {
					for _, cl := range all {
						now = now.Add(10 * time.Millisecond)
						if cl.beat(now).Persist {
							snaps = append(snaps, cloneGroup(t, g))
						}
					}
				}
			}
			final := g.MetadataVersion
			var restored *Group
			for _, s := range snaps {
				if s.MetadataVersion <= final-versions {
					restored = s // the last such write
				}
			}
			if restored == nil || g.State != protocol.GroupStable {
				t.Fatalf("setup: no snapshot at version %d", final-versions)
			}
			Restore(restored, now, cfg)
			for _, cl := range all {
				cl.g = restored
			}
			statuses := map[protocol.Status]int{}
			fenced := map[string]bool{}
			for round := 0; round < 30; round++ {
				for _, cl := range all {
					now = now.Add(10 * time.Millisecond)
					r := cl.beat(now).Response
					statuses[r.Status]++
					if r.Status == protocol.StatusFencedMemberEpoch {
						fenced[cl.sim.id] = true
					}
					checkReaders(t, all)
				}
			}
			t.Logf("restored version %d of %d, answers %v, fenced %v", restored.MetadataVersion, final, statuses, fenced)
			if restored.CorrectionOpen || restored.State != protocol.GroupStable || restored.LiveMembers() != 4 {
				t.Fatalf("no convergence: %s", dumpGroup(restored))
			}
			if statuses[protocol.StatusSyncMetadata] == 0 {
				t.Errorf("no SYNC_METADATA: the test did not exercise a correction")
			}
			if versions == 1 && len(fenced) > 0 {
				t.Errorf("members fenced after losing one version: %v", fenced)
			}
		})
	}
}

// checkReaders fails when two clients read one shard at once.
func checkReaders(t *testing.T, cs []*client) {
	t.Helper()
	reader := map[int]string{}
	for _, c := range cs {
		for _, s := range c.sim.reading() {
			if o, ok := reader[s]; ok {
				t.Fatalf("shard %d read by %s and %s", s, o, c.sim.id)
			}
			reader[s] = c.sim.id
		}
	}
}

// TestCorrectionLostHandOff: in the lost state shard 2 had moved from b to
// a, and a reads it; the restored state still gives it to b. a is told to
// let go of 2 (not fenced for reporting it), b is not given 2 while a still
// holds it, and the round stays open until a has released it.
func TestCorrectionLostHandOff(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 4, "a", "b")
	a, b := cs[0], cs[1]
	v := g.MetadataVersion
	if !slices.Equal(g.Target["a"], []int{0, 1}) || !slices.Equal(g.Target["b"], []int{2, 3}) {
		t.Fatalf("setup: %v", g.Target)
	}
	a.sim.owned, a.sim.version, a.sim.epoch = []int{0, 1, 2}, v+1, a.sim.epoch+1
	b.sim.owned, b.sim.version, b.sim.epoch = []int{3}, v+1, b.sim.epoch+1
	a.lenient, b.lenient = true, true
	violations := 0
	steps := []struct {
		who          *client
		status       protocol.Status
		wantAssigned []int
		wantPending  []int
		open         bool
	}{
		{a, protocol.StatusSyncMetadata, []int{0, 1}, []int{}, true},  // a must give 2 back
		{b, protocol.StatusSyncMetadata, []int{3}, []int{2}, true},    // 2 stays blocked by a
		{a, protocol.StatusRevokePending, []int{0, 1}, []int{}, true}, // a reports 2 REVOKING
		{b, protocol.StatusRevokePending, []int{3}, []int{2}, true},   // still blocked: round open
		{a, protocol.StatusOK, []int{0, 1}, []int{}, false},           // a reports 2 REVOKED: closes
		{b, protocol.StatusOK, []int{2, 3}, []int{}, false},
	}
	for i, st := range steps {
		now = now.Add(10 * time.Millisecond)
		r := st.who.beat(now).Response
		if r.Status != st.status || !slices.Equal(assigned(r), st.wantAssigned) || !slices.Equal(pending(r), st.wantPending) {
			t.Fatalf("step %d (%s): %s assigned %v pending %v; want %s %v %v", i, st.who.sim.id, r.Status,
				assigned(r), pending(r), st.status, st.wantAssigned, st.wantPending)
		}
		if g.CorrectionOpen != st.open {
			t.Fatalf("step %d: round open %v", i, g.CorrectionOpen)
		}
		checkReaders(t, cs)
		violations += len(CheckInvariants(g))
	}
	// The restored record had b granted 2 while a reported reading it: the
	// monitor shows that overlap until b's report clears it.
	if violations == 0 {
		t.Errorf("the overlap was never reported")
	}
}

// TestAbsurdVersionRefused: a reported version no coordinator could have
// issued is refused rather than moving the group's version to the limit.
func TestAbsurdVersionRefused(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 2, "a")
	v := g.MetadataVersion
	cs[0].sim.version = 1<<63 - 1
	req := cs[0].sim.request()
	res := Heartbeat(g, req, now.Add(time.Second), testConfig())
	if res.Response.Status != protocol.StatusInvalidRequest || g.MetadataVersion != v || g.CorrectionOpen || res.Persist {
		t.Fatalf("absurd version: %+v, group version %d", res.Response, g.MetadataVersion)
	}
}

// TestStoreWentBackSeveralVersions: the lost history went two versions past
// the restored one and the members saw different parts of it: a and b last
// heard version v+1, c version v+2 (d joined, e joined and only c and e
// heard of it). a's report opens the round and the group jumps to v+2,
// the very version c carries: c's report looks in sync, and c's epoch from
// the lost history, above the restored assignment epoch, is refused
// INVALID_REQUEST (our member runtime stops on it). Only when c reports
// first (and moves the group past v+2) does it pass.
//
// Open: the rule that makes this pass is not settled yet; the simulation
// finds the same with simStoreGoesBack on.
func TestStoreWentBackSeveralVersions(t *testing.T) {
	t.Parallel()
	for first := range 5 {
		t.Run(fmt.Sprint(first), func(t *testing.T) {
			g, cs, now := stable(t, 8, "a", "b", "c")
			restored := cloneGroup(t, g)
			d := newClient(t, g, "d")
			all := append(cs, d)
			now = settle(t, now, all...)
			e := newClient(t, g, "e")
			for range 3 {
				now = now.Add(10 * time.Millisecond)
				cs[2].beat(now)
				e.beat(now)
			}
			all = append(all, e)
			Restore(restored, now, testConfig())
			for _, cl := range all {
				cl.g, cl.lenient = restored, true
			}
			order := append(slices.Clone(all[first:]), all[:first]...)
			for range 30 {
				for _, cl := range order {
					now = now.Add(10 * time.Millisecond)
					cl.beat(now) // fails on INVALID_REQUEST
					checkReaders(t, all)
				}
			}
			if restored.CorrectionOpen || restored.State != protocol.GroupStable {
				t.Fatalf("no convergence: %s", dumpGroup(restored))
			}
		})
	}
}

// TestCorrectionMovesTheGroupOncePerLoad: a member reporting a whole step
// past the group's version with every heartbeat moves it once, not once
// per heartbeat: what a lost history could have reached is bounded from
// the version loaded (correctionCap), whichever way the cap was set.
func TestCorrectionMovesTheGroupOncePerLoad(t *testing.T) {
	cfg := testConfig()
	cfg.MaxCorrectionStep = 1000
	for _, tc := range []struct {
		name    string
		restore bool
	}{
		{"restored from the store", true},
		{"never restored", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _, now := stable(t, 4, "a", "b")
			if tc.restore {
				Restore(g, now, cfg)
			}
			base := g.MetadataVersion
			a := g.Members["a"]
			moved := 0
			for i := range 100 {
				now = now.Add(time.Millisecond)
				before := g.MetadataVersion
				res := Heartbeat(g, hb("a", a.Epoch, g.MetadataVersion+cfg.MaxCorrectionStep, a.Current), now, cfg)
				switch {
				case g.MetadataVersion != before:
					moved++
				case res.Response.Status != protocol.StatusInvalidRequest || res.Persist:
					t.Fatalf("report %d past the cap: %s persist %v", i, res.Response.Status, res.Persist)
				}
			}
			if moved != 1 || g.MetadataVersion > base+cfg.MaxCorrectionStep+1 {
				t.Fatalf("moved %d times to %d from %d; want once, to at most %d", moved, g.MetadataVersion, base, base+cfg.MaxCorrectionStep+1)
			}
			// The other member still syncs to the group's version.
			b := g.Members["b"]
			if r := Heartbeat(g, hb("b", b.Epoch, b.MetadataVersion, b.Current), now, cfg).Response; r.Status != protocol.StatusSyncMetadata || r.MetadataVersion != g.MetadataVersion {
				t.Fatalf("b after the refused reports: %s v%d", r.Status, r.MetadataVersion)
			}
		})
	}
}
