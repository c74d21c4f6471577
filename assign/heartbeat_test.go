package assign

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// stable returns a STABLE group of 6 shards with settled clients for ids.
func stable(t *testing.T, shards int, ids ...string) (*Group, []*client, time.Time) {
	t.Helper()
	g := NewGroup("orders", "billing", shards, t0)
	var cs []*client
	now := t0
	for _, id := range ids {
		c := newClient(t, g, id)
		cs = append(cs, c)
		now = now.Add(time.Millisecond)
		c.beat(now)
	}
	now = settle(t, now, cs...)
	if g.State != protocol.GroupStable {
		t.Fatalf("group did not settle: %s", dumpGroup(g))
	}
	return g, cs, now
}

func TestJoin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		members      []string // already settled
		joiner       string
		wantEpoch    int64
		wantAssigned []int
		wantPending  []int
	}{
		{"first member gets everything", nil, "a", 1, []int{0, 1, 2, 3, 4, 5}, []int{}},
		// b's share is still held by a: pending until a lets go.
		{"second member waits for its share", []string{"a"}, "b", 2, []int{}, []int{3, 4, 5}},
		// The two most loaded shed their highest shards.
		{"third member", []string{"a", "b"}, "c", 3, []int{}, []int{2, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGroup("orders", "billing", 6, t0)
			now := t0
			if len(tc.members) > 0 {
				g, _, now = stable(t, 6, tc.members...)
			}
			version := g.MetadataVersion
			res := Heartbeat(g, joinReq(tc.joiner), now, testConfig())
			r := res.Response
			if r.Status != protocol.StatusOK || r.MemberEpoch != tc.wantEpoch || r.GroupEpoch != tc.wantEpoch || r.AssignmentEpoch != tc.wantEpoch {
				t.Fatalf("join answered %+v, want OK at epoch %d", r, tc.wantEpoch)
			}
			if !slices.Equal(assigned(r), tc.wantAssigned) || !slices.Equal(pending(r), tc.wantPending) {
				t.Errorf("assigned %v pending %v, want %v %v", assigned(r), pending(r), tc.wantAssigned, tc.wantPending)
			}
			if !res.Persist || r.MetadataVersion != version+1 || r.Assignment.MetadataVersion != r.MetadataVersion {
				t.Errorf("persist %v version %d (was %d)", res.Persist, r.MetadataVersion, version)
			}
			if !slices.Equal(res.Events.Joined, []string{tc.joiner}) || !res.Events.Rebalanced {
				t.Errorf("events %+v", res.Events)
			}
			if len(tc.wantPending) > 0 && r.HeartbeatIntervalMs != 200 {
				t.Errorf("pending shards answered interval %d, want the reconcile interval", r.HeartbeatIntervalMs)
			}
			if g.State != protocol.GroupReconciling {
				t.Errorf("state %s after a join", g.State)
			}
			m := g.Members[tc.joiner]
			if m.State != protocol.MemberActive || m.Reported || !slices.Equal(m.Granted, tc.wantAssigned) && len(tc.wantAssigned) > 0 {
				t.Errorf("member %+v", m)
			}
			checkNoNulls(t, r)
		})
	}
}

func TestJoinIgnoresReport(t *testing.T) {
	t.Parallel()
	g := NewGroup("orders", "billing", 2, t0)
	req := hb("a", 0, 99, []int{7}, revokingShard(9, protocol.RevokeRevoking, 1))
	r := Heartbeat(g, req, t0, testConfig()).Response
	if r.Status != protocol.StatusOK || !slices.Equal(assigned(r), []int{0, 1}) {
		t.Fatalf("join with a report: %+v", r)
	}
	if m := g.Members["a"]; len(m.Current)+len(m.Revoking) != 0 || g.CorrectionOpen {
		t.Fatalf("join report was recorded: %+v", m)
	}
}

func TestReplayedJoin(t *testing.T) {
	t.Parallel()
	g := NewGroup("orders", "billing", 4, t0)
	cfg := testConfig()
	first := Heartbeat(g, joinReq("a"), t0, cfg)
	before := durable(g)
	// The answer was lost; the member asks again.
	again := Heartbeat(g, joinReq("a"), t0.Add(time.Second), cfg)
	if again.Persist || durable(g) != before {
		t.Errorf("replay changed durable state: persist %v", again.Persist)
	}
	if again.Response.Status != protocol.StatusOK || again.Response.MemberEpoch != first.Response.MemberEpoch ||
		!slices.Equal(assigned(again.Response), assigned(first.Response)) || again.Events.DuplicateMember {
		t.Errorf("replay %+v, first %+v", again.Response, first.Response)
	}
	if !g.Members["a"].LeaseExpiresAt.Equal(t0.Add(time.Second + cfg.MemberLease)) {
		t.Errorf("replay did not renew the lease")
	}
}

func TestDuplicateMemberRetries(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 4, "a")
	cfg := testConfig()
	lease := g.Members["a"].LeaseExpiresAt
	before := durable(g)
	res := Heartbeat(g, withInstance(dupJoin("a"), "second"), now, cfg)
	if res.Response.Status != protocol.StatusRetry || !res.Events.DuplicateMember || res.Persist || durable(g) != before ||
		res.Response.ErrorCode != protocol.CodeMemberIDInUse {
		t.Fatalf("duplicate join: %+v persist %v", res.Response, res.Persist)
	}
	if res.Response.MemberEpoch != 0 || res.Response.HeartbeatIntervalMs != 3000 {
		t.Errorf("retry answer %+v", res.Response)
	}
	if !g.Members["a"].LeaseExpiresAt.Equal(lease) {
		t.Errorf("a duplicate renewed the live incarnation's lease")
	}
	// Close to the live incarnation's lease end the newcomer is asked back
	// just after it, not a whole interval later.
	near := Heartbeat(g, withInstance(dupJoin("a"), "second"), lease.Add(-time.Second), cfg).Response
	if want := (time.Second + cfg.ReconcileInterval).Milliseconds(); near.Status != protocol.StatusRetry || near.HeartbeatIntervalMs != want {
		t.Errorf("retry 1s before the lease ends: %s every %d ms, want RETRY every %d ms", near.Status, near.HeartbeatIntervalMs, want)
	}
	// The live incarnation keeps working meanwhile.
	if r := cs[0].beat(now.Add(time.Second)).Response; r.Status != protocol.StatusOK {
		t.Fatalf("live incarnation answered %s", r.Status)
	}
	// Once its lease lapses the newcomer rejoins.
	lease = g.Members["a"].LeaseExpiresAt
	res = Heartbeat(g, withInstance(dupJoin("a"), "second"), lease, cfg)
	if res.Response.Status != protocol.StatusOK || !slices.Equal(res.Events.Expired, []string{"a"}) ||
		!slices.Equal(res.Events.Joined, []string{"a"}) {
		t.Fatalf("newcomer after the lease: %+v %+v", res.Response, res.Events)
	}
	if !slices.Equal(assigned(res.Response), []int{0, 1, 2, 3}) {
		t.Errorf("newcomer got %v", assigned(res.Response))
	}
}

func TestSteadyHeartbeat(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 8, "a", "b")
	version, epoch := g.MetadataVersion, g.GroupEpoch
	before := durable(g)
	for i := 0; i < 3; i++ {
		now = now.Add(3 * time.Second)
		for _, c := range cs {
			res := c.beat(now)
			if res.Persist || res.Response.Status != protocol.StatusOK || len(res.Response.Assignment.PendingShards) != 0 {
				t.Fatalf("steady heartbeat: persist %v %+v", res.Persist, res.Response)
			}
			if res.Response.HeartbeatIntervalMs != 3000 {
				t.Errorf("steady interval %d", res.Response.HeartbeatIntervalMs)
			}
		}
	}
	if durable(g) != before || g.MetadataVersion != version || g.GroupEpoch != epoch {
		t.Errorf("steady heartbeats changed the group")
	}
	if g.Members["a"].LeaseExpiresAt != now.Add(15*time.Second) {
		t.Errorf("lease not renewed")
	}
}

func TestSteadyHeartbeatAllocations(t *testing.T) {
	g, cs, now := stable(t, 64, "a", "b", "c", "d")
	req := cs[0].sim.request()
	cfg := testConfig()
	allocs := testing.AllocsPerRun(100, func() {
		res := Heartbeat(g, req, now, cfg)
		if res.Persist {
			t.Fatal("persisted")
		}
	})
	// The op, the two wire slices of the answer.
	if allocs > 4 {
		t.Errorf("steady heartbeat allocates %.0f times", allocs)
	}
}

func TestEpochRules(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tests := []struct {
		name string
		// run gets a STABLE group where a (epoch ea, previous epoch pa) and b
		// hold shards 0–2 and 3–5 and returns the request to send.
		run         func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest
		status      protocol.Status
		fenced      bool
		persist     bool
		previousAcc bool
	}{
		{
			name: "current epoch",
			run: func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest {
				return hb("a", ea, g.MetadataVersion, []int{0, 1, 2})
			},
			status: protocol.StatusOK,
		},
		{
			name: "epoch from the future",
			run: func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest {
				return hb("a", ea+1, g.MetadataVersion, []int{0, 1, 2})
			},
			status:  protocol.StatusInvalidRequest,
			persist: false,
		},
		{
			name: "previous epoch, owned in target",
			run: func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest {
				return hb("a", pa, g.MetadataVersion, []int{0, 1})
			},
			status:      protocol.StatusOK,
			persist:     true, // current shrank to {0,1}
			previousAcc: true,
		},
		{
			name: "older than previous epoch",
			run: func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest {
				return hb("a", pa-1, g.MetadataVersion, []int{0, 1, 2})
			},
			status:  protocol.StatusFencedMemberEpoch,
			fenced:  true,
			persist: true,
		},
		{
			name: "previous epoch claiming another member's shard",
			run: func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest {
				return hb("a", pa, g.MetadataVersion, []int{0, 1, 2, 3})
			},
			status:  protocol.StatusFencedMemberEpoch,
			fenced:  true,
			persist: true,
		},
		{
			name: "leaving member with a positive epoch",
			run: func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest {
				Heartbeat(g, leaveReq(g, "a"), now, cfg)
				return hb("a", ea, g.MetadataVersion, nil)
			},
			status:  protocol.StatusFencedMemberEpoch,
			persist: false,
		},
		{
			name: "unknown member with an epoch",
			run: func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest {
				return hb("zz", 3, g.MetadataVersion, nil)
			},
			status:  protocol.StatusUnknownMemberID,
			persist: false,
		},
		{
			name:    "unknown member leaving",
			run:     func(g *Group, ea, pa int64, now time.Time) *protocol.HeartbeatRequest { return leaveReq(g, "zz") },
			status:  protocol.StatusUnknownMemberID,
			persist: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Three members, then c leaves: a's epoch moved twice.
			g, cs, now := stable(t, 6, "a", "b", "c")
			cs[2].sim.startLeave()
			for len(cs[2].sim.revoking) > 0 {
				now = now.Add(10 * time.Millisecond)
				cs[2].beat(now)
			}
			now = settle(t, now, cs[0], cs[1]).Add(time.Second)
			m := g.Members["a"]
			ea, pa := m.Epoch, m.PreviousEpoch
			if pa < 2 || pa >= ea || !slices.Equal(g.Target["a"], []int{0, 1, 2}) {
				t.Fatalf("setup: epochs %d/%d target %v", ea, pa, g.Target["a"])
			}
			req := tc.run(g, ea, pa, now)
			groupEpoch := g.GroupEpoch
			res := Heartbeat(g, req, now, cfg)
			r := res.Response
			if r.Status != tc.status {
				t.Fatalf("status %s, want %s (%+v)", r.Status, tc.status, r)
			}
			if res.Persist != tc.persist {
				t.Errorf("persist %v, want %v", res.Persist, tc.persist)
			}
			if res.Events.PreviousEpochAccepted != tc.previousAcc {
				t.Errorf("previous epoch accepted %v", res.Events.PreviousEpochAccepted)
			}
			if tc.fenced {
				// The fence frees nothing (a may read until its lease lapses or
				// it rejoins): its shards stay held.
				if m.State != protocol.MemberFenced || m.Epoch != ea+1 || len(m.Current)+len(m.Granted) == 0 ||
					g.GroupEpoch != groupEpoch+1 || !slices.Equal(res.Events.Fenced, []string{"a"}) {
					t.Errorf("not fenced: %+v group epoch %d", m, g.GroupEpoch)
				}
				if r.MemberEpoch != m.Epoch || len(r.Assignment.AssignedShards) != 0 {
					t.Errorf("fenced answer %+v", r)
				}
				// A fenced member rejoins at once, not after its lease.
				rj := Heartbeat(g, joinReq("a"), now, cfg).Response
				if rj.Status != protocol.StatusOK || rj.MemberEpoch != g.GroupEpoch {
					t.Errorf("rejoin after fencing: %+v", rj)
				}
			}
			if tc.status == protocol.StatusInvalidRequest && (r.MemberEpoch != ea+1 || r.GroupEpoch != 0) {
				t.Errorf("invalid request answer %+v", r)
			}
			checkNoNulls(t, r)
		})
	}
}

// TestPreviousEpochAfterLostRevocation: the answer that moved shard 2 from a
// to the newcomer c was lost, so a retries with its previous epoch and still
// owns 2. It is processed, not fenced, and 2 stays blocked for c.
func TestPreviousEpochAfterLostRevocation(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 6, "a", "b")
	cfg := testConfig()
	a := cs[0]
	now = now.Add(time.Second)
	Heartbeat(g, joinReq("c"), now, cfg)
	target := g.Target["a"]
	if len(target) != 2 {
		t.Fatalf("a's target %v", target)
	}
	req := a.sim.request()
	lost := Heartbeat(g, req, now, cfg)
	if lost.Response.MemberEpoch == a.sim.epoch {
		t.Fatalf("the join did not change a's epoch")
	}
	// Retry with the same, now previous, epoch (a new request: the
	// process's next requestSeq).
	res := Heartbeat(g, a.sim.request(), now.Add(time.Millisecond), cfg)
	if res.Response.Status != protocol.StatusOK || !res.Events.PreviousEpochAccepted {
		t.Fatalf("retry after a lost answer: %+v", res.Response)
	}
	if !slices.Equal(assigned(res.Response), target) {
		t.Errorf("assigned %v, want %v", assigned(res.Response), target)
	}
	if res.Response.HeartbeatIntervalMs != 200 {
		t.Errorf("a holds shards outside its target: interval %d", res.Response.HeartbeatIntervalMs)
	}
	c := Heartbeat(g, hb("c", g.Members["c"].Epoch, g.MetadataVersion, nil), now.Add(2*time.Millisecond), cfg).Response
	if len(intersect(assigned(c), g.Members["a"].Current)) != 0 || len(pending(c)) == 0 {
		t.Errorf("c was granted %v while a holds %v", assigned(c), g.Members["a"].Current)
	}
}

func TestReconcileInterval(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 6, "a")
	cfg := testConfig()
	now = now.Add(time.Second)
	b := newClient(t, g, "b")
	if r := b.beat(now).Response; r.HeartbeatIntervalMs != 200 || len(pending(r)) != 3 {
		t.Fatalf("joiner with pending shards: %+v", r)
	}
	// a now holds shards outside its target: short interval while it does.
	if r := cs[0].beat(now).Response; r.HeartbeatIntervalMs != 200 {
		t.Errorf("holder of moved shards: interval %d", r.HeartbeatIntervalMs)
	}
	now = settle(t, now, cs[0], b)
	for _, c := range []*client{cs[0], b} {
		if r := c.beat(now.Add(time.Second)).Response; r.HeartbeatIntervalMs != 3000 {
			t.Errorf("%s settled: interval %d", c.sim.id, r.HeartbeatIntervalMs)
		}
	}
	_ = cfg
}

// TestHandOff walks one shard hand-off step by step: the newcomer gets
// nothing until the holder reports the shard terminal.
func TestHandOff(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 2, "a")
	cfg := testConfig()
	a := cs[0]
	b := newClient(t, g, "b")
	steps := []struct {
		who          *client
		wantAssigned []int
		wantPending  []int
	}{
		{b, []int{}, []int{1}},
		{a, []int{0}, []int{}}, // a revokes 1
		{b, []int{}, []int{1}}, // a still owns it
		{a, []int{0}, []int{}}, // a reports 1 REVOKING
		{b, []int{}, []int{1}},
		{a, []int{0}, []int{}}, // a reports 1 REVOKED, inFlight 0
		{b, []int{1}, []int{}},
	}
	for i, st := range steps {
		now = now.Add(10 * time.Millisecond)
		r := st.who.beat(now).Response
		if r.Status != protocol.StatusOK || !slices.Equal(assigned(r), st.wantAssigned) || !slices.Equal(pending(r), st.wantPending) {
			t.Fatalf("step %d (%s): %s assigned %v pending %v, want %v %v", i, st.who.sim.id, r.Status,
				assigned(r), pending(r), st.wantAssigned, st.wantPending)
		}
	}
	settle(t, now, a, b)
	if g.State != protocol.GroupStable {
		t.Errorf("state %s", g.State)
	}
	_ = cfg
}

func TestResponsesHaveNoNullArrays(t *testing.T) {
	t.Parallel()
	g := NewGroup("orders", "billing", 0, t0)
	cfg := testConfig()
	reqs := []*protocol.HeartbeatRequest{
		joinReq("a"),             // OK with nothing to assign
		hb("a", 1, 2, nil),       // OK steady
		hb("a", 9, 2, nil),       // INVALID_REQUEST
		hb("zz", 4, 2, nil),      // UNKNOWN_MEMBER_ID
		dupJoin("a"),             // RETRY (duplicate)
		hb("a", 1, 99, nil),      // SYNC_METADATA
		hb("a", -1, 100, nil),    // OK leave, at the version SYNC_METADATA answered
		hb("a", 1, 2, []int{0}),  // FENCED_MEMBER_EPOCH
		hb("zz", -1, 2, nil),     // UNKNOWN leave
		hb("a", 1, 2, []int{33}), // FENCED
	}
	seen := map[protocol.Status]bool{}
	for i, req := range reqs {
		r := Heartbeat(g, req, t0.Add(time.Duration(i)*time.Second), cfg).Response
		seen[r.Status] = true
		checkNoNulls(t, r)
	}
	for _, st := range []protocol.Status{protocol.StatusOK, protocol.StatusInvalidRequest, protocol.StatusUnknownMemberID,
		protocol.StatusRetry, protocol.StatusSyncMetadata, protocol.StatusFencedMemberEpoch} {
		if !seen[st] {
			t.Errorf("no %s answer was produced; the test lost its coverage", st)
		}
	}
}

// stableGroup builds a STABLE group of n members over shards directly (no
// hand-offs to simulate), then restores it as the actor would.
func stableGroup(tb testing.TB, n, shards int) (*Group, []*protocol.HeartbeatRequest) {
	g := NewGroup("orders", "billing", shards, t0)
	ids, target := balanced(n, shards)
	g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion = int64(n), int64(n), int64(n+1)
	g.Target = target
	g.OwnerEpochs = make([]int64, shards)
	for s := range g.OwnerEpochs {
		g.OwnerEpochs[s] = 1
	}
	reqs := make([]*protocol.HeartbeatRequest, n)
	for i, id := range ids {
		t := target[id]
		g.Members[id] = &Member{ID: id, Name: "svc", State: protocol.MemberActive, Epoch: int64(n), PreviousEpoch: int64(n - 1), InstanceID: "inst-" + id,
			MetadataVersion: g.MetadataVersion, Current: t, Granted: t, Reported: true, JoinedAt: t0, StateChangedAt: t0}
		reqs[i] = hb(id, int64(n), g.MetadataVersion, t)
		for _, s := range t {
			reqs[i].ShardProgress = append(reqs[i].ShardProgress, protocol.ShardProgress{Shard: protocol.Shard{ShardIndex: s}, LastAckedID: "1-0"})
		}
	}
	Restore(g, t0, testConfig())
	if g.State != protocol.GroupStable {
		tb.Fatalf("not stable: %s", g.State)
	}
	return g, reqs
}

// BenchmarkHeartbeatSteady is the common case: every member of a STABLE
// 1,000-member group heartbeating with nothing to change.
func BenchmarkHeartbeatSteady(b *testing.B) {
	for _, shards := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("1000members/%dshards", shards), func(b *testing.B) {
			g, reqs := stableGroup(b, 1000, shards)
			cfg := testConfig()
			now := t0
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now = now.Add(3 * time.Millisecond) // every member every 3 s
				res := Heartbeat(g, reqs[i%len(reqs)], now, cfg)
				if res.Persist || res.Response.Status != protocol.StatusOK {
					b.Fatalf("not steady: %+v", res)
				}
				i++
			}
		})
	}
}

// BenchmarkHeartbeatReconciling is the cost while something is blocked: the
// blocked sets are computed for every heartbeat.
func BenchmarkHeartbeatReconciling(b *testing.B) {
	g, reqs := stableGroup(b, 1000, 10_000)
	cfg := testConfig()
	Heartbeat(g, joinReq("zzz"), t0, cfg) // its share stays pending: RECONCILING
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		req := reqs[i%len(reqs)]
		req.MemberEpoch = g.Members[req.MemberID].Epoch
		Heartbeat(g, req, t0.Add(time.Millisecond), cfg)
		i++
	}
}

// TestSteadyHeartbeatLargeGroup keeps the steady path honest at size: it
// must not scan the group.
func TestSteadyHeartbeatLargeGroup(t *testing.T) {
	g, reqs := stableGroup(t, 1000, 10_000)
	allocs := testing.AllocsPerRun(200, func() {
		if res := Heartbeat(g, reqs[17], t0.Add(time.Second), testConfig()); res.Persist {
			t.Fatal("persisted")
		}
	})
	if allocs > 4 {
		t.Errorf("steady heartbeat of a 1,000-member group allocates %.0f times", allocs)
	}
}
