package assign

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// cloneGroup round-trips g through JSON, as a store might: derived caches
// are lost, which is what a load looks like.
func cloneGroup(t *testing.T, g *Group) *Group {
	t.Helper()
	raw, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var out Group
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestTickExpiresLiveMembers(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g, cs, now := stable(t, 6, "a", "b")
	a, b := cs[0], cs[1]
	now = now.Add(time.Second)
	a.beat(now) // a keeps heartbeating, b goes quiet
	bLease := g.Members["b"].LeaseExpiresAt
	bEpoch := g.Members["b"].Epoch
	groupEpoch := g.GroupEpoch

	tests := []struct {
		name    string
		at      time.Time
		expired []string
	}{
		{"before the lease", bLease.Add(-time.Millisecond), nil},
		{"at the lease", bLease, []string{"b"}},
		{"again", bLease.Add(500 * time.Millisecond), nil},
	}
	for _, tc := range tests {
		res := Tick(g, tc.at, cfg)
		if !slices.Equal(res.Events.Expired, tc.expired) {
			t.Fatalf("%s: expired %v, want %v", tc.name, res.Events.Expired, tc.expired)
		}
		if res.Persist != (len(tc.expired) > 0) {
			t.Errorf("%s: persist %v", tc.name, res.Persist)
		}
		if res.Response.Status != "" {
			t.Errorf("%s: tick answered %+v", tc.name, res.Response)
		}
	}
	m := g.Members["b"]
	if m.State != protocol.MemberExpired || m.Epoch != bEpoch+1 || len(m.Current)+len(m.Granted) != 0 || g.GroupEpoch != groupEpoch+1 {
		t.Fatalf("b after expiry: %+v, group epoch %d", m, g.GroupEpoch)
	}
	if !slices.Equal(g.Target["a"], []int{0, 1, 2, 3, 4, 5}) || g.Target["b"] != nil {
		t.Errorf("target after expiry: %v", g.Target)
	}
	// a picks b's shards up at once: b stopped reading when its lease ended.
	if r := a.beat(bLease.Add(600 * time.Millisecond)).Response; !slices.Equal(assigned(r), []int{0, 1, 2, 3, 4, 5}) {
		t.Errorf("a got %v", assigned(r))
	}
	// b comes back with its old epoch: fenced; then it rejoins.
	r := b.beat(bLease.Add(700 * time.Millisecond)).Response
	if r.Status != protocol.StatusFencedMemberEpoch || len(b.sim.owned) != 0 {
		t.Fatalf("expired member heartbeating: %+v", r)
	}
	if r = b.beat(bLease.Add(800 * time.Millisecond)).Response; r.Status != protocol.StatusOK || g.Members["b"].State != protocol.MemberActive {
		t.Fatalf("rejoin: %+v", r)
	}
}

// TestHeartbeatRunsMaintenance: a heartbeat arriving after another
// member's lease expires it even when the actor's Tick is late.
func TestHeartbeatRunsMaintenance(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 4, "a", "b")
	now = now.Add(time.Second)
	cs[0].beat(now)
	late := g.Members["b"].LeaseExpiresAt.Add(time.Millisecond)
	res := cs[0].beat(late)
	if !slices.Equal(res.Events.Expired, []string{"b"}) || len(assigned(res.Response)) != 4 {
		t.Fatalf("heartbeat after b's lease: %+v %+v", res.Events, res.Response)
	}
	// And a member heartbeating after its own lease is expired first.
	r := cs[0].beat(late.Add(time.Minute)).Response
	if r.Status != protocol.StatusFencedMemberEpoch {
		t.Fatalf("late member answered %s", r.Status)
	}
}

func TestRebalanceDeadline(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tests := []struct {
		name string
		// leave: a leaves while draining, else a keeps owning moved shards.
		leave bool
		// byHeartbeat: a's own heartbeat at the deadline fences it (the
		// actor's Tick came late), else the Tick does.
		byHeartbeat bool
	}{
		{"live member never revokes", false, false},
		{"leaving member keeps draining", true, false},
		{"live member heartbeating past its deadline", false, true},
		{"leaving member heartbeating past its deadline", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _, now := stable(t, 4, "a")
			now = now.Add(time.Second)
			Heartbeat(g, joinReq("b"), now, cfg)
			epoch := g.Members["a"].Epoch
			var req *protocol.HeartbeatRequest
			if tc.leave {
				req = leaveReq(g, "a", revokingShard(0, protocol.RevokeDraining, 3), revokingShard(1, protocol.RevokeDraining, 1))
			} else {
				req = hb("a", epoch, g.MetadataVersion, []int{0, 1, 2, 3})
			}
			res := Heartbeat(g, req, now, cfg)
			if !tc.leave {
				req.MemberEpoch = res.Response.MemberEpoch
			}
			deadline := g.Members["a"].RebalanceDeadline
			if !deadline.Equal(now.Add(cfg.RebalanceTimeout)) {
				t.Fatalf("deadline %v, want %v", deadline, now.Add(cfg.RebalanceTimeout))
			}
			if res.Next.After(deadline) {
				t.Errorf("Next %v after the deadline", res.Next)
			}
			// Heartbeats renew the lease but never move the deadline. b
			// keeps heartbeating too, waiting for its shards.
			for at := now.Add(time.Second); at.Before(deadline); at = at.Add(time.Second) {
				bm := g.Members["b"]
				if r := Heartbeat(g, hb("b", bm.Epoch, g.MetadataVersion, nil), at, cfg).Response; len(intersect(assigned(r), []int{0, 1})) != 0 {
					t.Fatalf("b was granted %v while a holds 0 and 1", assigned(r))
				}
				res = Heartbeat(g, req, at, cfg)
				if res.Response.Status != protocol.StatusOK {
					t.Fatalf("at %v: %+v", at.Sub(now), res.Response)
				}
				if !tc.leave && res.Response.HeartbeatIntervalMs != 200 {
					t.Fatalf("holder of moved shards: interval %d", res.Response.HeartbeatIntervalMs)
				}
			}
			if !g.Members["a"].RebalanceDeadline.Equal(deadline) {
				t.Fatalf("deadline moved")
			}
			b := g.Members["b"]
			if tc.byHeartbeat {
				res = Heartbeat(g, req, deadline, cfg)
				if res.Response.Status != protocol.StatusFencedMemberEpoch {
					t.Fatalf("holder heartbeating at its deadline: %+v", res.Response)
				}
			} else {
				res = Tick(g, deadline, cfg)
			}
			if !slices.Equal(res.Events.Fenced, []string{"a"}) || g.Members["a"].State != protocol.MemberFenced {
				t.Fatalf("at the deadline: %+v", res.Events)
			}
			// The fence frees nothing: a may read on the strength of its last
			// OK until that answer's lease lapses.
			readable := g.Members["a"].ReadableUntil
			if !readable.After(deadline) {
				t.Fatalf("a readable until %v, not after its deadline %v", readable, deadline)
			}
			r := Heartbeat(g, hb("b", b.Epoch, g.MetadataVersion, nil), deadline, cfg).Response
			if len(intersect(assigned(r), []int{0, 1})) != 0 {
				t.Fatalf("b was granted %v right at a's fence, while a may still read", assigned(r))
			}
			res = Tick(g, readable, cfg)
			if !slices.Equal(res.Events.Released, []string{"a"}) {
				t.Fatalf("a not released when its lease lapsed: %+v", res.Events)
			}
			r = Heartbeat(g, hb("b", b.Epoch, g.MetadataVersion, nil), readable, cfg).Response
			if !slices.Equal(assigned(r), []int{0, 1, 2, 3}) {
				t.Errorf("b still waits after a's lease lapsed: %+v", r)
			}
		})
	}
}

func TestDeadlineClearedWhenReleased(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 4, "a")
	b := newClient(t, g, "b")
	now = now.Add(time.Second)
	b.beat(now)
	cs[0].beat(now)
	if g.Members["a"].RebalanceDeadline.IsZero() {
		t.Fatal("no deadline while a holds b's shards")
	}
	settle(t, now, cs[0], b)
	if !g.Members["a"].RebalanceDeadline.IsZero() {
		t.Errorf("deadline kept after a released: %v", g.Members["a"].RebalanceDeadline)
	}
}

func TestLeavingReleasedAtLease(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g, _, now := stable(t, 4, "a", "b")
	now = now.Add(time.Second)
	// JVM style: DRAINING on leave, then silence.
	Heartbeat(g, leaveReq(g, "a", revokingShard(0, protocol.RevokeDraining, 1), revokingShard(1, protocol.RevokeDraining, 1)), now, cfg)
	lease := g.Members["a"].LeaseExpiresAt
	if r := Heartbeat(g, hb("b", g.Members["b"].Epoch, g.MetadataVersion, []int{2, 3}), now, cfg).Response; !slices.Equal(pending(r), []int{0, 1}) {
		t.Fatalf("b while a drains: %+v", r)
	}
	b := g.Members["b"]
	Heartbeat(g, hb("b", b.Epoch, g.MetadataVersion, []int{2, 3}), lease.Add(-time.Second), cfg)
	res := Tick(g, lease, cfg)
	if len(res.Events.Fenced) != 0 || !res.Persist || len(g.Members["a"].Revoking) != 0 || g.Members["a"].State != protocol.MemberLeaving {
		t.Fatalf("at a's lease: %+v %+v", res.Events, g.Members["a"])
	}
	if r := Heartbeat(g, hb("b", g.Members["b"].Epoch, g.MetadataVersion, []int{2, 3}), lease, cfg).Response; !slices.Equal(assigned(r), []int{0, 1, 2, 3}) {
		t.Fatalf("b after a's lease: %+v", r)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g, cs, now := stable(t, 4, "a", "b", "c")
	now = now.Add(time.Second)
	cs[0].beat(now)
	cs[1].sim.startLeave()
	cs[1].beat(now)
	cs[1].beat(now) // DRAINING → REVOKED: released
	lease := g.Members["c"].LeaseExpiresAt
	// a keeps heartbeating until well past the retention.
	for at := now; at.Before(now.Add(cfg.StaleMemberRetention + time.Minute)); at = at.Add(3 * time.Second) {
		res := cs[0].beat(at)
		if len(res.Events.Pruned) > 0 {
			t.Logf("pruned %v at %v", res.Events.Pruned, at.Sub(now))
		}
	}
	if _, ok := g.Members["b"]; ok {
		t.Errorf("left member b not pruned")
	}
	if _, ok := g.Members["c"]; ok {
		t.Errorf("expired member c not pruned")
	}
	// Exactly at the retention, not before.
	g2, cs2, now2 := stable(t, 2, "x", "y")
	x := cs2[0]
	yLease := g2.Members["y"].LeaseExpiresAt
	at := now2
	for ; at.Before(yLease); at = at.Add(3 * time.Second) {
		x.beat(at)
	}
	if res := x.beat(at); !slices.Equal(res.Events.Expired, []string{"y"}) {
		t.Fatalf("y not expired: %+v", res.Events)
	}
	expiredAt := g2.Members["y"].StateChangedAt
	epoch := g2.GroupEpoch
	for _, tc := range []struct {
		at     time.Time
		pruned bool
	}{
		{expiredAt.Add(cfg.StaleMemberRetention - time.Millisecond), false},
		{expiredAt.Add(cfg.StaleMemberRetention), true},
	} {
		for ; at.Before(tc.at); at = at.Add(3 * time.Second) {
			x.beat(at) // x stays alive
		}
		res := Tick(g2, tc.at, cfg)
		if got := slices.Equal(res.Events.Pruned, []string{"y"}); got != tc.pruned {
			t.Errorf("at %v: pruned %v", tc.at.Sub(expiredAt), res.Events.Pruned)
		}
	}
	if g2.GroupEpoch != epoch+1 || g2.Members["y"] != nil {
		t.Errorf("prune: group epoch %d → %d", epoch, g2.GroupEpoch)
	}
	_ = lease
}

func TestRestore(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g, cs, now := stable(t, 6, "a", "b")
	b := newClient(t, g, "c")
	now = now.Add(time.Second)
	b.beat(now)
	cs[0].beat(now) // a now holds a shard outside its target: deadline
	before := durable(g)
	loaded := cloneGroup(t, g)
	// The coordinator is down for a long time.
	later := now.Add(10 * time.Minute)
	res := Restore(loaded, later, cfg)
	for id, m := range loaded.Members {
		if !m.LeaseExpiresAt.Equal(later.Add(cfg.MemberLease)) {
			t.Errorf("%s lease %v", id, m.LeaseExpiresAt)
		}
	}
	if d := loaded.Members["a"].RebalanceDeadline; !d.Equal(later.Add(cfg.RebalanceTimeout)) {
		t.Errorf("deadline %v not restarted", d)
	}
	if len(res.Events.Expired)+len(res.Events.Fenced) != 0 || res.Next.IsZero() {
		t.Errorf("restore: %+v", res)
	}
	// Nothing but the deadline changed; a tick right after expires nobody.
	if tick := Tick(loaded, later.Add(time.Second), cfg); len(tick.Events.Expired)+len(tick.Events.Fenced) != 0 || tick.Persist {
		t.Errorf("tick after restore: %+v", tick)
	}
	if loaded.State != g.State || !sameTarget(loaded.Target, g.Target) || loaded.MetadataVersion != g.MetadataVersion {
		t.Errorf("restore changed the assignment")
	}
	_ = before
}

// TestRestoreRepairs: a group whose target names a dead member is repaired.
func TestRestoreRepairs(t *testing.T) {
	t.Parallel()
	g, _, now := stable(t, 4, "a")
	g.Target["ghost"] = []int{7}
	res := Restore(g, now, testConfig())
	if !res.Persist || len(CheckInvariants(g)) != 0 {
		t.Fatalf("not repaired: %v", CheckInvariants(g))
	}
}
