package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

func TestMembersConvergeThroughPendingShards(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 6)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	c := coordtest.NewMember("c", "orders", "orders")

	if resp := a.Beat(s); resp.Status != protocol.StatusOK || len(a.Owned) != 6 {
		t.Fatalf("first member: %s owns %v", resp.Status, a.Owned)
	}
	coordtest.Converge(t, s, 5, a)

	// b joins: its shards are pending while a still holds them.
	resp := b.Beat(s)
	if resp.Status != protocol.StatusOK || len(resp.Assignment.AssignedShards) != 0 || len(resp.Assignment.PendingShards) != 3 {
		t.Fatalf("join of b: %+v", resp)
	}
	if resp.HeartbeatIntervalMs != protocol.DefaultReconcileHeartbeatInterval.Milliseconds() {
		t.Fatalf("a member with pending shards should heartbeat fast, got %d ms", resp.HeartbeatIntervalMs)
	}
	coordtest.CheckNoOverlap(t, a, b)
	coordtest.Converge(t, s, 6, a, b)
	if len(a.Owned) != 3 || len(b.Owned) != 3 {
		t.Fatalf("after two converge: a=%v b=%v", a.Owned, b.Owned)
	}
	if a.Last.HeartbeatIntervalMs != protocol.DefaultHeartbeatInterval.Milliseconds() {
		t.Fatalf("a settled member heartbeats at the normal interval, got %d ms", a.Last.HeartbeatIntervalMs)
	}

	c.Beat(s)
	coordtest.Converge(t, s, 6, a, b, c)
	for _, m := range []*coordtest.Member{a, b, c} {
		if len(m.Owned) != 2 {
			t.Fatalf("%s owns %v after three converge", m.ID, m.Owned)
		}
	}
	var g protocol.GroupResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders", nil, http.StatusOK, &g)
	if g.State != protocol.GroupStable || len(g.TargetAssignmentSummary) != 3 {
		t.Fatalf("group = %+v", g)
	}
	var as protocol.AssignmentsResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/assignments", nil, http.StatusOK, &as)
	if len(as.InvariantViolations) != 0 || len(as.TargetAssignment) != 3 || len(as.CurrentAssignments["a"]) != 2 {
		t.Fatalf("assignments = %+v", as)
	}
	var ms protocol.MembersResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &ms)
	if len(ms.Members) != 3 || ms.Members[0].MemberID != "a" || ms.Members[0].State != protocol.MemberActive {
		t.Fatalf("members = %+v", ms)
	}
}

func TestReplayedJoinAnswersTheSame(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	m := coordtest.NewMember("m1", "orders", "orders")
	req := m.Request()
	first := s.Heartbeat("orders", "orders", req)
	again := s.Heartbeat("orders", "orders", req) // the first answer was lost
	if first.Status != protocol.StatusOK || again.Status != protocol.StatusOK ||
		first.MemberEpoch != again.MemberEpoch || first.GroupEpoch != again.GroupEpoch ||
		!slices.Equal(protocol.Indexes(first.Assignment.AssignedShards), protocol.Indexes(again.Assignment.AssignedShards)) {
		t.Fatalf("replayed join differs:\n first %+v\n again %+v", first, again)
	}
	// Once the member reported ownership, epoch 0 is another process: RETRY.
	m.Apply(req, again)
	m.Beat(s)
	dup := s.Heartbeat("orders", "orders", coordtest.NewMember("m1", "orders", "orders").Request())
	if dup.Status != protocol.StatusRetry {
		t.Fatalf("second incarnation got %s, want RETRY", dup.Status)
	}
	if resp := m.Beat(s); resp.Status != protocol.StatusOK {
		t.Fatalf("live incarnation got %s after the duplicate", resp.Status)
	}
}

func TestLostResponseDoesNotFence(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	coordtest.Converge(t, s, 4, a)
	b.Beat(s)
	// a's next answer bumps its epoch, but it is lost: a retries with its
	// previous epoch and its previous report.
	req := a.Request()
	lost := s.Heartbeat("orders", "orders", req)
	if lost.MemberEpoch == req.MemberEpoch {
		t.Fatalf("expected the epoch to move after b joined, stayed %d", lost.MemberEpoch)
	}
	retry := s.Heartbeat("orders", "orders", req)
	if retry.Status == protocol.StatusFencedMemberEpoch || retry.Status == protocol.StatusUnknownMemberID {
		t.Fatalf("a retried heartbeat after a lost response was answered %s", retry.Status)
	}
	a.Apply(req, retry)
	coordtest.Converge(t, s, 6, a, b)
}

func TestClaimOfAnotherMembersShardIsFenced(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	// With instanceIds a fenced member's rejoin frees its shards at once (a
	// reference client without one waits for its lease).
	a.InstanceID, b.InstanceID = "a-1", "b-1"
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	// b claims one of a's shards.
	req := b.Request()
	req.OwnedShards = append(req.OwnedShards, protocol.Shard{ShardIndex: a.Owned[0]})
	resp := s.Heartbeat("orders", "orders", req)
	if resp.Status != protocol.StatusFencedMemberEpoch || len(resp.Assignment.AssignedShards) != 0 {
		t.Fatalf("claim of another member's shard: %+v", resp)
	}
	b.Apply(req, resp)
	// b rejoins and the group converges again with no overlap.
	coordtest.Converge(t, s, 8, a, b)
}

func TestGracefulLeave(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	resp := b.Leave(s)
	if resp.Status != protocol.StatusOK || resp.MemberEpoch != protocol.EpochLeave ||
		len(resp.Assignment.AssignedShards) != 0 || len(resp.Assignment.PendingShards) != 0 {
		t.Fatalf("leave answer: %+v", resp)
	}
	if again := b.Leave(s); again.Status != protocol.StatusOK || again.MemberEpoch != protocol.EpochLeave {
		t.Fatalf("repeated leave: %+v", again)
	}
	coordtest.Converge(t, s, 4, a)
	if len(a.Owned) != 4 {
		t.Fatalf("a owns %v after b left", a.Owned)
	}
	unknown := coordtest.NewMember("ghost", "orders", "orders")
	if r := unknown.Leave(s); r.Status != protocol.StatusUnknownMemberID {
		t.Fatalf("leave of an unknown member: %s", r.Status)
	}
}

func TestExpiredMemberIsFencedAndItsShardsMove(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Group: assign.Config{
		HeartbeatInterval: 50 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond, MemberLease: 300 * time.Millisecond,
	}})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	// b crashes: it stops heartbeating. The group's own timer expires it.
	var ms protocol.MembersResponse
	if !poll.Soon(10*time.Second, func() bool {
		ms = protocol.MembersResponse{}
		s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &ms)
		state := protocol.MemberState("")
		for _, m := range ms.Members {
			if m.MemberID == "b" {
				state = m.State
			}
		}
		if state == protocol.MemberExpired {
			return true
		}
		a.Beat(s) // a stays alive
		return false
	}) {
		t.Fatalf("b was not expired by the timer; members = %+v", ms.Members)
	}
	if resp := b.Beat(s); resp.Status != protocol.StatusFencedMemberEpoch {
		t.Fatalf("expired member's heartbeat: %s", resp.Status)
	}
	coordtest.Converge(t, s, 6, a)
	if len(a.Owned) != 4 {
		t.Fatalf("a owns %v after b expired", a.Owned)
	}
}

func TestHeartbeatStatuses(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: false})
	s.CreateStream("orders", 2)
	m0 := coordtest.NewMember("m0", "orders", "orders")
	tests := []struct {
		name   string
		group  string
		edit   func(*protocol.HeartbeatRequest)
		status protocol.Status
	}{
		{"unsupported version", "orders", func(r *protocol.HeartbeatRequest) { r.ProtocolVersion = 2 }, protocol.StatusUnsupportedProtocol},
		{"member id differs from path", "orders", func(r *protocol.HeartbeatRequest) { r.MemberID = "other" }, protocol.StatusInvalidRequest},
		{"blank request id", "orders", func(r *protocol.HeartbeatRequest) { r.RequestID = "" }, protocol.StatusInvalidRequest},
		{"no capacity", "orders", func(r *protocol.HeartbeatRequest) { r.RuntimeConsumerCapacity.RuntimeMaxConcurrency = 0 }, protocol.StatusInvalidRequest},
		{"epoch below -1", "orders", func(r *protocol.HeartbeatRequest) { r.MemberEpoch = -2 }, protocol.StatusInvalidRequest},
		{"unknown member with an epoch", "orders", func(r *protocol.HeartbeatRequest) { r.MemberEpoch = 3 }, protocol.StatusUnknownMemberID},
		{"unknown group, auto-create off", "nope", func(*protocol.HeartbeatRequest) {}, protocol.StatusUnknownMemberID},
		{"known member epoch too high", "orders", func(r *protocol.HeartbeatRequest) {
			r.MemberID, r.MemberEpoch, r.MetadataVersion = "m0", 99, m0.Version
		}, protocol.StatusInvalidRequest},
	}
	// m0 is a known member for the last case, which reports the version
	// m0 was answered: an older one would be an earlier process's.
	m0.Beat(s)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := coordtest.NewMember("m1", "orders", tc.group).Request()
			tc.edit(&req)
			path := base + "/streams/orders/groups/" + tc.group + "/members/" + map[bool]string{true: "m0", false: "m1"}[req.MemberID == "m0"] + "/heartbeat"
			var resp protocol.HeartbeatResponse
			s.JSON(http.MethodPost, path, req, http.StatusOK, &resp)
			if resp.Status != tc.status || resp.HeartbeatIntervalMs <= 0 || resp.RebalanceTimeoutMs <= 0 {
				t.Fatalf("got %+v, want status %s with positive intervals", resp, tc.status)
			}
		})
	}
	t.Run("unknown stream", func(t *testing.T) {
		m := coordtest.NewMember("m1", "nostream", "g")
		if resp := m.Beat(s); resp.Status != protocol.StatusUnknownMemberID {
			t.Fatalf("unknown stream: %s", resp.Status)
		}
	})
	t.Run("wrong field type is a status, not a 400", func(t *testing.T) {
		var resp protocol.HeartbeatResponse
		s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/members/m1/heartbeat",
			`{"protocolVersion":1,"requestId":"r","memberId":"m1","memberEpoch":"zero"}`, http.StatusOK, &resp)
		if resp.Status != protocol.StatusInvalidRequest {
			t.Fatalf("got %s", resp.Status)
		}
	})
}

func TestJoinRegistersUnknownGroupWhenAutoCreateIsOn(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true})
	s.CreateStream("orders", 3)
	m := coordtest.NewMember("m1", "orders", "analytics")
	if resp := m.Beat(s); resp.Status != protocol.StatusOK || len(m.Owned) != 3 {
		t.Fatalf("join into an unregistered group: %+v", resp)
	}
	s.JSON(http.MethodGet, base+"/streams/orders/groups/analytics", nil, http.StatusOK, nil)
	// A non-join heartbeat never registers a group.
	req := coordtest.NewMember("m2", "orders", "other").Request()
	req.MemberEpoch = 4
	if resp := s.Heartbeat("orders", "other", req); resp.Status != protocol.StatusUnknownMemberID {
		t.Fatalf("non-join for an unknown group: %s", resp.Status)
	}
}

// TestUnparseableReportTimesAnswer200: the optional report times of a
// heartbeat (progress updatedAt, revoke ackedAt) that do not parse are
// ignored, so the member is answered in a 200 as if it had not sent them.
func TestUnparseableReportTimesAnswer200(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true})
	s.CreateStream("orders", 2)
	url := s.URL + base + "/streams/orders/groups/orders/members/m1/heartbeat"
	for name, body := range map[string]string{
		"zone-less updatedAt": `{"protocolVersion":1,"requestId":"r1","memberId":"m1","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[],"shardProgress":[{"shard":{"shardIndex":0},"streamKey":"orders:0","updatedAt":"2026-11-30T08:00:00"}]}`,
		"numeric ackedAt":     `{"protocolVersion":1,"requestId":"r2","memberId":"m1","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[],"revokingShards":[{"shard":{"shardIndex":1},"state":"REVOKED","inFlight":0,"ackedAt":12}]}`,
	} {
		status, raw := post(t, http.MethodPost, url, []byte(body))
		if status != http.StatusOK {
			t.Fatalf("%s: HTTP %d: %s", name, status, raw)
		}
		var resp protocol.HeartbeatResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatalf("%s: %v: %s", name, err, raw)
		}
		if resp.Status == protocol.StatusInvalidRequest || resp.Status == "" {
			t.Fatalf("%s: status %q, want the times ignored: %s", name, resp.Status, raw)
		}
	}
}

// TestLateHeartbeatIsRetry: a heartbeat whose requestSeq is below the
// last one decided for its instanceId (held up while a later one was
// answered) is answered RETRY over HTTP and changes nothing: a, which
// reads its shards by now, keeps them.
func TestLateHeartbeatIsRetry(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	a.InstanceID = "a-1"
	early := a.Request() // owns nothing yet; held up
	early.RequestSeq = 1
	seq := int64(1)
	for range 6 {
		seq++
		req := a.Request()
		req.RequestSeq = seq
		a.Apply(req, s.Heartbeat("orders", "orders", req))
	}
	if len(a.Owned) != 4 {
		t.Fatalf("a owns %v, want all 4 shards", a.Owned)
	}
	if late := s.Heartbeat("orders", "orders", early); late.Status != protocol.StatusRetry {
		t.Fatalf("late heartbeat (requestSeq 1 after %d): %+v", seq, late)
	}
	var g protocol.MembersResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &g)
	i := slices.IndexFunc(g.Members, func(m protocol.Member) bool { return m.MemberID == "a" })
	if i < 0 || len(g.Members[i].CurrentAssignment) != 4 {
		t.Fatalf("after the late heartbeat the group holds %+v, want a with all 4 shards", g.Members)
	}
}
