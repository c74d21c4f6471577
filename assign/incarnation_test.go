package assign

import (
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// withInstance returns req sent by incarnation inst.
func withInstance(req *protocol.HeartbeatRequest, inst string) *protocol.HeartbeatRequest {
	req.InstanceID = inst
	return req
}

// TestIncarnations covers the epoch-0 rules of member incarnations: one
// grant per asker, a replayed join answered the same, a rejoin of the same
// incarnation freeing its shards at once.
func TestIncarnations(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tests := []struct {
		name string
		// inst is the live incarnation's instanceId ("" = reference client).
		inst string
		// second is the epoch-0 heartbeat that arrives after the member
		// joined and reported.
		second     func() *protocol.HeartbeatRequest
		wantStatus protocol.Status
		wantFreed  bool // the member's shards are free at once
		duplicate  bool
	}{
		{"other instanceId", "p1", func() *protocol.HeartbeatRequest { return withInstance(dupJoin("a"), "p2") }, protocol.StatusRetry, false, true},
		{"instanceId where none is stored", "", func() *protocol.HeartbeatRequest { return withInstance(dupJoin("a"), "p2") }, protocol.StatusRetry, false, true},
		{"none where one is stored", "p1", func() *protocol.HeartbeatRequest { return dupJoin("a") }, protocol.StatusRetry, false, true},
		{"reference client, other requestId", "", func() *protocol.HeartbeatRequest { return dupJoin("a") }, protocol.StatusRetry, false, true},
		{"same instanceId: the process restarted its session", "p1", func() *protocol.HeartbeatRequest { return withInstance(dupJoin("a"), "p1") }, protocol.StatusOK, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGroup("orders", "billing", 4, t0)
			join := withInstance(joinReq("a"), tc.inst)
			r := Heartbeat(g, join, t0, cfg).Response
			if r.Status != protocol.StatusOK || len(r.Assignment.AssignedShards) != 4 {
				t.Fatalf("join: %+v", r)
			}
			for _, s := range r.Assignment.AssignedShards {
				if s.OwnerEpoch != 1 {
					t.Fatalf("first grant of shard %d has owner epoch %d", s.ShardIndex, s.OwnerEpoch)
				}
			}
			if r.MemberLeaseMs != cfg.MemberLease.Milliseconds() {
				t.Errorf("memberLeaseMs %d", r.MemberLeaseMs)
			}
			// A replay of the join request gets the same answer.
			again := Heartbeat(g, withInstance(joinReq("a"), tc.inst), t0.Add(time.Millisecond), cfg)
			if again.Persist || again.Response.Status != protocol.StatusOK || !slices.Equal(again.Response.Assignment.AssignedShards, r.Assignment.AssignedShards) {
				t.Fatalf("replayed join: %+v", again)
			}
			rep := withInstance(hb("a", r.MemberEpoch, r.MetadataVersion, []int{0, 1, 2, 3}), tc.inst)
			if r := Heartbeat(g, rep, t0.Add(2*time.Millisecond), cfg).Response; r.Status != protocol.StatusOK {
				t.Fatalf("report: %+v", r)
			}
			res := Heartbeat(g, tc.second(), t0.Add(3*time.Millisecond), cfg)
			if res.Response.Status != tc.wantStatus || res.Events.DuplicateMember != tc.duplicate {
				t.Fatalf("second asker: %+v events %+v", res.Response, res.Events)
			}
			m := g.Members["a"]
			if freed := len(m.Current)+len(m.Granted) == 0 || res.Response.Status == protocol.StatusOK; freed != tc.wantFreed {
				t.Errorf("freed %v, want %v: %+v", freed, tc.wantFreed, m)
			}
			if tc.wantStatus == protocol.StatusRetry {
				if res.Persist || m.InstanceID != tc.inst {
					t.Errorf("a RETRY changed the member: %+v", m)
				}
				return
			}
			// The rejoined incarnation got its shards back under new tokens.
			for _, s := range res.Response.Assignment.AssignedShards {
				if s.OwnerEpoch != 2 {
					t.Errorf("regrant of shard %d has owner epoch %d, want 2", s.ShardIndex, s.OwnerEpoch)
				}
			}
		})
	}
}

// TestStaleIncarnationFencedAlone: a positive-epoch heartbeat of another
// incarnation than the stored one is answered FENCED_MEMBER_EPOCH and
// changes nothing; the live incarnation keeps its shards and epoch.
func TestStaleIncarnationFencedAlone(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g := NewGroup("orders", "billing", 4, t0)
	r := Heartbeat(g, withInstance(joinReq("a"), "new"), t0, cfg).Response
	live := withInstance(hb("a", r.MemberEpoch, r.MetadataVersion, []int{0, 1, 2, 3}), "new")
	Heartbeat(g, live, t0.Add(time.Millisecond), cfg)
	before := partsOf(g)
	for _, req := range []*protocol.HeartbeatRequest{
		withInstance(hb("a", r.MemberEpoch, r.MetadataVersion, []int{0, 1}), "old"),
		withInstance(hb("a", r.MemberEpoch+5, 1, []int{0}), "old"),
		withInstance(hb("a", r.MemberEpoch, r.MetadataVersion+500, []int{0}), "old"),
		hb("a", r.MemberEpoch, r.MetadataVersion, nil),
	} {
		res := Heartbeat(g, req, t0.Add(2*time.Millisecond), cfg)
		if res.Response.Status != protocol.StatusFencedMemberEpoch || !res.Events.StaleIncarnation || res.Persist {
			t.Fatalf("stale incarnation %+v: %+v", req, res)
		}
		if res.Response.MemberLeaseMs == 0 {
			t.Errorf("no memberLeaseMs")
		}
	}
	leave := withInstance(leaveReq(g, "a"), "old")
	if res := Heartbeat(g, leave, t0.Add(3*time.Millisecond), cfg); res.Response.Status != protocol.StatusOK || res.Persist {
		t.Fatalf("a stale incarnation's leave: %+v", res)
	}
	if bad := checkChanges(before, partsOf(g), Changes{}); len(bad) > 0 {
		t.Fatalf("the stored member changed: %v", bad)
	}
	if res := Heartbeat(g, live, t0.Add(4*time.Millisecond), cfg); res.Response.Status != protocol.StatusOK || len(res.Response.Assignment.AssignedShards) != 4 {
		t.Fatalf("live incarnation: %+v", res.Response)
	}
}

// TestBoundedCorrection: a version beyond the bounded step is refused for
// that member alone; the group stays usable for everyone.
func TestBoundedCorrection(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxCorrectionStep = 1000
	g, cs, now := stable(t, 4, "a", "b")
	version := g.MetadataVersion
	now = now.Add(time.Second)
	bogus := hb("a", 999_999, 1<<62-1, []int{0})
	res := Heartbeat(g, bogus, now, cfg)
	if res.Response.Status != protocol.StatusInvalidRequest || res.Response.ErrorCode != protocol.CodeInvalidRequest || res.Persist {
		t.Fatalf("bogus version: %+v", res)
	}
	a := g.Members["a"]
	far := hb("a", a.Epoch, version+1001, a.Current)
	if r := Heartbeat(g, far, now, cfg).Response; r.Status != protocol.StatusInvalidRequest {
		t.Fatalf("one past the step: %+v", r)
	}
	if g.MetadataVersion != version || g.CorrectionOpen {
		t.Fatalf("group moved: version %d correction %v", g.MetadataVersion, g.CorrectionOpen)
	}
	now = settle(t, now, cs...)
	if r := Heartbeat(g, joinReq("c"), now, cfg).Response; r.Status != protocol.StatusOK {
		t.Fatalf("a joiner after the bogus report: %+v", r)
	}
	// Within the step a correction still runs.
	near := hb("a", a.Epoch, g.MetadataVersion+1000, a.Current)
	if r := Heartbeat(g, near, now, cfg).Response; r.Status != protocol.StatusSyncMetadata {
		t.Fatalf("within the step: %+v", r)
	}
}

// TestOwnerEpochsRiseWhenShardsMove: a shard keeps its token while it stays
// with its holder and gets a higher one each time it moves.
func TestOwnerEpochsRiseWhenShardsMove(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 4, "a")
	first := slices.Clone(g.OwnerEpochs)
	b := newClient(t, g, "b")
	cs = append(cs, b)
	now = settle(t, now.Add(time.Second), cs...)
	for s, e := range g.OwnerEpochs {
		moved := slices.Contains(g.Target["b"], s)
		if moved && e <= first[s] || !moved && e != first[s] {
			t.Errorf("shard %d: owner epoch %d after %d (moved %v)", s, e, first[s], moved)
		}
	}
	// A re-created group continues above the tombstone.
	tomb := NewTombstone(g, now)
	g2 := NewGroupAfter(&tomb, "orders", "billing", 4, now)
	if g2.MetadataVersion <= g.MetadataVersion || g2.GroupEpoch < g.GroupEpoch {
		t.Fatalf("re-created group at version %d epoch %d, old %d %d", g2.MetadataVersion, g2.GroupEpoch, g.MetadataVersion, g.GroupEpoch)
	}
	r := Heartbeat(g2, joinReq("c"), now, testConfig()).Response
	for _, s := range r.Assignment.AssignedShards {
		if s.OwnerEpoch <= g.OwnerEpochs[s.ShardIndex] {
			t.Errorf("shard %d: owner epoch %d in the re-created group, %d before", s.ShardIndex, s.OwnerEpoch, g.OwnerEpochs[s.ShardIndex])
		}
	}
	if r.MemberEpoch <= g.GroupEpoch {
		t.Errorf("member epoch %d not above the old group epoch %d", r.MemberEpoch, g.GroupEpoch)
	}
}

// TestLateEarlierJoinAttemptFreesNothing: a's first join attempt is held up
// in the network; a retries with a new requestId and requestSeq (as our
// runtime numbers every request), is answered and reads its shards. The
// coordinator restarts, which forgets the requestSeq it last decided, and
// then the first attempt arrives: from the same process, epoch 0, not the
// join that created the incarnation. Taken as a rejoin it would free what a
// reads, and b would be granted a's shards. It is answered RETRY to nobody
// and changes nothing, before and after a restart.
func TestLateEarlierJoinAttemptFreesNothing(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "same process", true: "after a restart"}[restart], func(t *testing.T) {
			g := NewGroup("orders", "billing", 4, t0)
			store := newSimStore(g)
			a := newClient(t, g, "a")
			early := a.sim.request() // attempt 1, held up
			now := t0.Add(time.Second)
			for range 3 { // attempt 2 joins; a reads all four
				now = now.Add(10 * time.Millisecond)
				store.write(g, a.beat(now).Changes)
			}
			if len(a.sim.reading()) != 4 {
				t.Fatalf("setup: a reads %v", a.sim.reading())
			}
			if restart {
				g = store.load()
				Restore(g, now, testConfig())
				a.g = g
			}
			res := Heartbeat(g, early, now.Add(10*time.Millisecond), testConfig())
			if res.Response.Status != protocol.StatusRetry || res.Persist {
				t.Errorf("the late first attempt: %s, persist %v; want RETRY, nothing written", res.Response.Status, res.Persist)
			}
			b := newClient(t, g, "b")
			all := []*client{a, b}
			now = now.Add(20 * time.Millisecond)
			for range 10 {
				for _, c := range all {
					now = now.Add(10 * time.Millisecond)
					c.beat(now)
					checkReaders(t, all)
				}
			}
		})
	}
}
