package assign

import (
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// reference strips what only our clients send: a reference client's request.
func reference(req *protocol.HeartbeatRequest) *protocol.HeartbeatRequest {
	req.InstanceID, req.RequestSeq = "", 0
	return req
}

// TestLateReportFreesNothingItsMemberReads: a reference client's heartbeat,
// sent before it took its grant, is held up in the network; its retry is
// answered and the member reads all four shards. Then c joins and takes
// some over. The first copy arrives last and reports less than the member
// reads: it must free none of c's shards. The member's next reports, at the
// version of the answer that took them away, release them.
func TestLateReportFreesNothingItsMemberReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		lateOwned []int
	}{
		{"sent before any grant was taken", nil},
		{"sent before two grants were taken", []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			g := NewGroup("orders", "billing", 4, t0)
			join := Heartbeat(g, reference(joinReq("a")), t0, cfg).Response
			if !slices.Equal(assigned(join), []int{0, 1, 2, 3}) {
				t.Fatalf("a's join: %+v", join)
			}
			late := reference(hb("a", join.MemberEpoch, join.MetadataVersion, tc.lateOwned))
			late.RequestID = "held-up"
			if r := Heartbeat(g, reference(hb("a", join.MemberEpoch, join.MetadataVersion, []int{0, 1, 2, 3})), t0, cfg).Response; r.Status != protocol.StatusOK {
				t.Fatalf("a's retry: %+v", r)
			}
			Heartbeat(g, reference(joinReq("c")), t0, cfg)
			moved := g.Target["c"]
			if len(moved) == 0 || len(intersect(moved, tc.lateOwned)) > 0 {
				t.Fatalf("c's target %v: the late copy must leave it out (it owns %v)", moved, tc.lateOwned)
			}

			Heartbeat(g, late, t0, cfg)
			a := g.Members["a"]
			if held := union(union(a.Current, a.Revoking), a.Granted); !subset(moved, held) {
				t.Fatalf("after the late copy a holds %v (current %v revoking %v granted %v); c's target %v is free while a reads it",
					held, a.Current, a.Revoking, a.Granted, moved)
			}
			if v := CheckInvariants(g); len(v) > 0 {
				t.Fatal(v)
			}
			c := g.Members["c"]
			if r := Heartbeat(g, reference(hb("c", c.Epoch, g.MetadataVersion, nil)), t0, cfg).Response; len(assigned(r)) > 0 {
				t.Fatalf("c granted %v while a reads it", assigned(r))
			}

			// a hears it must give them up, stops, and says so.
			heard := Heartbeat(g, reference(hb("a", join.MemberEpoch, join.MetadataVersion, []int{0, 1, 2, 3})), t0, cfg).Response
			if heard.Status != protocol.StatusOK || len(intersect(assigned(heard), moved)) > 0 {
				t.Fatalf("a's heartbeat after the late copy: %+v", heard)
			}
			var released []protocol.RevokingShard
			for _, s := range moved {
				released = append(released, revokingShard(s, protocol.RevokeRevoked, 0))
			}
			Heartbeat(g, reference(hb("a", heard.MemberEpoch, heard.MetadataVersion, assigned(heard), released...)), t0, cfg)
			if r := Heartbeat(g, reference(hb("c", c.Epoch, g.MetadataVersion, nil)), t0, cfg).Response; !slices.Equal(assigned(r), moved) {
				t.Fatalf("c after a released %v: %+v", moved, r)
			}
		})
	}
}

// TestReleaseNeedsTheVersionThatTookTheShard: a report that leaves out a
// shard an answer took away frees it only when it carries that answer's
// version or a later one.
func TestReleaseNeedsTheVersionThatTookTheShard(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g, _, now := stable(t, 4, "a")
	a := g.Members["a"]
	before := g.MetadataVersion
	Heartbeat(g, joinReq("c"), now, cfg)
	took := Heartbeat(g, hb("a", a.Epoch, before, a.Current), now, cfg).Response
	moved := g.Target["c"]
	if took.MetadataVersion <= before || len(moved) == 0 {
		t.Fatalf("setup: %+v, c's target %v", took, moved)
	}
	for _, tc := range []struct {
		name    string
		version int64
		freed   bool
	}{
		{"older than the answer that took them", before, false},
		{"the answer's version", took.MetadataVersion, true},
	} {
		gc := cloneGroup(t, g)
		req := hb("a", took.MemberEpoch, tc.version, assigned(took))
		req.RequestSeq = 0 // judged by its version alone
		Heartbeat(gc, req, now, cfg)
		m := gc.Members["a"]
		if freed := len(intersect(moved, union(m.Current, m.Revoking))) == 0; freed != tc.freed {
			t.Errorf("%s: freed %v, want %v (a: current %v revoking %v withdrawn %v)", tc.name, freed, tc.freed, m.Current, m.Revoking, m.Withdrawn)
		}
	}
}

// TestLateLeaveOfAnEarlierProcess: a reference client's leave is held up in
// the network; its retry is answered and the process exits. A new process
// under the same member id (a restarted pod) joins and reads the shards
// the join gives it. Then the first copy of the old leave arrives. Nothing
// tells the two processes apart but the leave's metadata version, older
// than the rejoin: decided, it would end the new process's membership and
// free what it reads, for b to take.
func TestLateLeaveOfAnEarlierProcess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// crash: the coordinator restarts from its store before the late
		// copy arrives (nothing kept in memory may decide).
		crash bool
	}{
		{"same coordinator", false},
		{"after a coordinator restart", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, a, b, now := referencePair(t)

			// a stops reading, then leaves: the first copy is held up.
			a.sim.drop()
			a.sim.leaving = true
			late := a.sim.request()
			now = now.Add(time.Millisecond)
			a.beat(now) // the retry, answered: a is gone
			if m := g.Members["a"]; m.State != protocol.MemberLeaving || holds(m) {
				t.Fatalf("a after its leave: %+v", m)
			}
			now = settle(t, now, b)

			a2, now := restartedReference(t, g, now, b)
			reads := a2.sim.reading()
			if len(reads) == 0 {
				t.Fatalf("the new process of a reads nothing: %s", dumpGroup(g))
			}

			if tc.crash {
				store := newSimStore(g)
				g = store.load()
				Restore(g, now, a.cfg)
				b.g, a2.g = g, g
			}
			now = now.Add(time.Millisecond)
			Heartbeat(g, late, now, a.cfg)
			m := g.Members["a"]
			if held := union(union(m.Current, m.Revoking), m.Granted); !subset(reads, held) {
				t.Fatalf("after the late leave a holds %v (state %s); its new process reads %v", held, m.State, reads)
			}
			now = now.Add(time.Millisecond)
			if r := b.beat(now).Response; len(intersect(assigned(r), reads)) > 0 {
				t.Fatalf("b granted %v while the new process of a reads %v", assigned(r), reads)
			}
		})
	}
}

// TestWithdrawnStaysExactAfterAFence: a slow member releases one of the shards
// it was told to give up in the heartbeat that also finds its rebalance
// deadline passed. It is fenced, and answered without a view; what it
// still holds withdrawn must be exactly what it holds (the invariants the
// actor audits, and a record loaded later, depend on it).
func TestWithdrawnStaysExactAfterAFence(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g, _, now := stable(t, 4, "a")
	a := g.Members["a"]
	Heartbeat(g, joinReq("c"), now, cfg)
	took := Heartbeat(g, hb("a", a.Epoch, g.MetadataVersion-1, a.Current), now, cfg).Response
	moved := g.Target["c"]
	if len(moved) != 2 || len(a.Withdrawn) != 2 {
		t.Fatalf("setup: c's target %v, a withdrawn %v", moved, a.Withdrawn)
	}

	// Both drain slowly; past the deadline the first of the two is
	// released, the other still drains.
	deadline := a.RebalanceDeadline
	for now.Add(cfg.HeartbeatInterval).Before(deadline) {
		now = now.Add(cfg.HeartbeatInterval)
		draining := hb("a", took.MemberEpoch, took.MetadataVersion, assigned(took),
			revokingShard(moved[0], protocol.RevokeDraining, 1), revokingShard(moved[1], protocol.RevokeDraining, 1))
		if r := Heartbeat(g, draining, now, cfg).Response; r.Status != protocol.StatusOK {
			t.Fatalf("a draining: %+v", r)
		}
		c := g.Members["c"]
		if r := Heartbeat(g, hb("c", c.Epoch, g.MetadataVersion, nil), now, cfg).Response; r.Status != protocol.StatusOK {
			t.Fatalf("c waiting: %+v", r)
		}
	}
	now = deadline.Add(time.Millisecond)
	req := hb("a", took.MemberEpoch, took.MetadataVersion, assigned(took),
		revokingShard(moved[0], protocol.RevokeRevoked, 0), revokingShard(moved[1], protocol.RevokeDraining, 1))
	r := Heartbeat(g, req, now, cfg).Response
	if r.Status != protocol.StatusFencedMemberEpoch {
		t.Fatalf("a past its deadline: %+v", r)
	}
	if v := CheckInvariants(g); len(v) > 0 {
		t.Fatalf("after the fence: %v (a: current %v revoking %v granted %v withdrawn %v)", v, a.Current, a.Revoking, a.Granted, a.Withdrawn)
	}
}

// TestLateHeartbeatOfAnEarlierProcess: like TestLateLeaveOfAnEarlierProcess,
// but the late copy is the earlier process's last heartbeat (a positive
// epoch) before it left. It reports shards the new process does not hold:
// decided, it would fence the new process, which then reads nothing until
// its lease lapses. It is an earlier incarnation's: the caller alone is
// answered FENCED_MEMBER_EPOCH, the member is untouched.
func TestLateHeartbeatOfAnEarlierProcess(t *testing.T) {
	t.Parallel()
	g, a, b, now := referencePair(t)
	late := a.sim.request()
	late.RequestID = "held-up"

	a.sim.drop()
	a.sim.leaving = true
	now = now.Add(time.Millisecond)
	a.beat(now)
	now = settle(t, now, b)
	a2, now := restartedReference(t, g, now, b)
	reads := a2.sim.reading()
	if len(reads) == 0 || len(minus(protocol.Indexes(late.OwnedShards), reads)) == 0 {
		t.Fatalf("setup: the new process reads %v, the late copy owns %v", reads, protocol.Indexes(late.OwnedShards))
	}

	before := partsOf(g)
	now = now.Add(time.Millisecond)
	r := Heartbeat(g, late, now, a.cfg).Response
	if m := g.Members["a"]; r.Status != protocol.StatusFencedMemberEpoch || m.State != protocol.MemberActive {
		t.Fatalf("late heartbeat of the earlier process answered %s; a is %s", r.Status, m.State)
	}
	if after := partsOf(g); before.members["a"] != after.members["a"] {
		t.Fatalf("a changed: %s → %s", before.members["a"], after.members["a"])
	}
	now = now.Add(time.Millisecond)
	if r := a2.beat(now).Response; r.Status != protocol.StatusOK {
		t.Fatalf("the new process after the late copy: %+v", r)
	}
}

// referencePair is a group of four shards with two reference clients (no
// instanceId), a and b, joined and settled.
func referencePair(t *testing.T) (*Group, *client, *client, time.Time) {
	t.Helper()
	g := NewGroup("orders", "billing", 4, t0)
	a, b := newClient(t, g, "a"), newClient(t, g, "b")
	a.sim.instance, b.sim.instance = "", ""
	now := t0
	for _, c := range []*client{a, b} {
		now = now.Add(time.Millisecond)
		c.beat(now)
	}
	return g, a, b, settle(t, now, a, b)
}

// restartedReference is a new process of reference client a (a restarted
// pod under the same member id), joined and settled with others.
func restartedReference(t *testing.T, g *Group, now time.Time, others ...*client) (*client, time.Time) {
	t.Helper()
	a := newClient(t, g, "a")
	a.sim.instance = ""
	now = now.Add(time.Millisecond)
	a.beat(now)
	return a, settle(t, now, append([]*client{a}, others...)...)
}
