package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/internal/poll"
)

// The safe hand-off rules (docs/protocol.md: the hand-off invariant, member
// incarnations, ownership tokens, memberLeaseMs, monotonic versions),
// black-box over HTTP against the built binary with short timings.
const (
	handoffLease     = 3 * time.Second
	handoffRebalance = 2 * time.Second
)

// startHandoffServer runs the binary with authentication on; the handle
// it returns heartbeats, reads and deletes groups as one user holding
// MEMBER and WRITE (heartbeats need MEMBER: no admin shortcut).
func startHandoffServer(t *testing.T) *coordtest.Server {
	t.Helper()
	hash, err := auth.HashPassword("handoff-pw", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(t.TempDir(), "users.json")
	raw := `{"users":[{"username":"handoff","passwordHash":"` + string(hash) + `","roles":["MEMBER","WRITE"]}]}`
	if err := os.WriteFile(users, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, t.TempDir(), "--users", users, "--member-lease", "3s", "--heartbeat-interval", "1s", "--rebalance-timeout", "2s")
	t.Cleanup(func() {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	s := coordtest.Remote(t, p.url).As(coordtest.Basic("handoff", "handoff-pw"))
	s.CreateStream("orders", 4)
	return s
}

// member is a simulated member of group g of stream orders; inst "" is a
// reference client (no instanceId, a new requestId per call).
func member(id, g, inst string) *coordtest.Member {
	m := coordtest.NewMember(id, "orders", g)
	m.InstanceID = inst
	return m
}

// checkAnswer holds for every answer: memberLeaseMs is the server's lease,
// and every assigned shard carries a positive ownerEpoch.
func checkAnswer(t *testing.T, who string, r protocol.HeartbeatResponse) {
	t.Helper()
	if r.MemberLeaseMs != handoffLease.Milliseconds() {
		t.Errorf("%s: %s answer carries memberLeaseMs %d", who, r.Status, r.MemberLeaseMs)
	}
	for _, s := range r.Assignment.AssignedShards {
		if s.OwnerEpoch <= 0 {
			t.Errorf("%s: shard %d assigned without a positive ownerEpoch: %+v", who, s.ShardIndex, r)
		}
	}
}

func beat(t *testing.T, s *coordtest.Server, m *coordtest.Member) protocol.HeartbeatResponse {
	t.Helper()
	r := m.Beat(s)
	checkAnswer(t, m.ID, r)
	return r
}

// converge heartbeats members until settled, checking every answer.
func converge(t *testing.T, s *coordtest.Server, members ...*coordtest.Member) {
	t.Helper()
	coordtest.Converge(t, s, 30, members...)
	for _, m := range members {
		checkAnswer(t, m.ID, m.Last)
	}
}

func epochs(r protocol.HeartbeatResponse) map[int]int64 {
	out := map[int]int64{}
	for _, s := range r.Assignment.AssignedShards {
		out[s.ShardIndex] = s.OwnerEpoch
	}
	return out
}

// keepAlive heartbeats members every 500 ms until the time until.
func keepAlive(t *testing.T, s *coordtest.Server, until time.Time, members ...*coordtest.Member) {
	t.Helper()
	pace := time.NewTicker(500 * time.Millisecond)
	defer pace.Stop()
	for ; time.Now().Before(until); <-pace.C {
		for _, m := range members {
			beat(t, s, m)
		}
	}
}

func TestHandoffOverHTTP(t *testing.T) {
	t.Parallel()
	s := startHandoffServer(t)

	t.Run("second epoch-0 asker gets RETRY, a replayed join the same answer", func(t *testing.T) {
		a := member("a", "incarnations", "a-1")
		join := a.Request()
		first := s.Heartbeat("orders", "incarnations", join)
		again := s.Heartbeat("orders", "incarnations", join) // the first answer was lost
		checkAnswer(t, "a", first)
		if first.Status != protocol.StatusOK || !slices.Equal(first.Assignment.AssignedShards, again.Assignment.AssignedShards) ||
			first.MemberEpoch != again.MemberEpoch || len(first.Assignment.AssignedShards) != 4 {
			t.Fatalf("replayed join:\n first %+v\n again %+v", first, again)
		}
		a.Apply(join, again)
		beat(t, s, a)
		for _, dup := range []*coordtest.Member{member("a", "incarnations", "a-2"), member("a", "incarnations", "")} {
			r := beat(t, s, dup)
			if r.Status != protocol.StatusRetry {
				t.Fatalf("second asker (instanceId %q) got %+v", dup.InstanceID, r)
			}
		}
		if r := beat(t, s, a); r.Status != protocol.StatusOK || len(a.Owned) != 4 {
			t.Fatalf("live incarnation after the duplicates: %+v", r)
		}
		// A reference client: the same rule by requestId.
		ref := member("ref", "incarnations-ref", "")
		join = ref.Request()
		first = s.Heartbeat("orders", "incarnations-ref", join)
		again = s.Heartbeat("orders", "incarnations-ref", join)
		if !slices.Equal(first.Assignment.AssignedShards, again.Assignment.AssignedShards) || again.Status != protocol.StatusOK {
			t.Fatalf("reference replay: %+v / %+v", first, again)
		}
		ref.Apply(join, again)
		beat(t, s, ref)
		if r := beat(t, s, member("ref", "incarnations-ref", "")); r.Status != protocol.StatusRetry {
			t.Fatalf("second reference process got %+v", r)
		}
	})

	t.Run("stale incarnation is fenced alone", func(t *testing.T) {
		old := member("s", "stale", "old")
		beat(t, s, old)
		beat(t, s, old)
		// The old process hangs past its lease; a new one takes the id over.
		// The duration is the point: the lease must lapse, which no answer
		// tells the hung process.
		time.Sleep(handoffLease + 500*time.Millisecond)
		nu := member("s", "stale", "new")
		converge(t, s, nu)
		if len(nu.Owned) != 4 {
			t.Fatalf("new incarnation owns %v", nu.Owned)
		}
		tokens := epochs(nu.Last)
		// The old process comes back with its stale epoch.
		r := beat(t, s, old)
		if r.Status != protocol.StatusFencedMemberEpoch {
			t.Fatalf("stale incarnation got %+v", r)
		}
		r = beat(t, s, nu)
		if r.Status != protocol.StatusOK || len(nu.Owned) != 4 || !mapsEqual(epochs(r), tokens) {
			t.Fatalf("live incarnation after the stale one: %+v", r)
		}
	})

	t.Run("epoch-0 rejoin of the same incarnation frees its shards at once", func(t *testing.T) {
		x, y := member("x", "rejoin", "x-1"), member("y", "rejoin", "y-1")
		converge(t, s, x, y)
		before := epochs(x.Last)
		y.HoldRevokes = true // y would keep anything it is asked to give up
		// x restarts its session: same process, epoch 0, owns nothing.
		x.Epoch, x.Owned, x.Revoking = 0, []int{}, []int{}
		r := beat(t, s, x)
		if r.Status != protocol.StatusOK || len(r.Assignment.AssignedShards) != 2 || len(r.Assignment.PendingShards) != 0 {
			t.Fatalf("rejoin of the same incarnation: %+v", r)
		}
		for sh, e := range epochs(r) {
			if e <= before[sh] {
				t.Errorf("shard %d: ownerEpoch %d after the rejoin, %d before", sh, e, before[sh])
			}
		}
	})

	t.Run("ownerEpoch rises when a shard moves", func(t *testing.T) {
		p := member("p", "tokens", "p-1")
		converge(t, s, p)
		first := epochs(p.Last)
		q := member("q", "tokens", "q-1")
		converge(t, s, p, q)
		for sh, e := range epochs(q.Last) {
			if e <= first[sh] {
				t.Errorf("moved shard %d: ownerEpoch %d, was %d", sh, e, first[sh])
			}
		}
		for sh, e := range epochs(p.Last) {
			if e != first[sh] {
				t.Errorf("kept shard %d: ownerEpoch %d, was %d", sh, e, first[sh])
			}
		}
	})

	t.Run("a bogus huge metadataVersion leaves the group usable", func(t *testing.T) {
		b := member("b", "bogus", "b-1")
		converge(t, s, b)
		req := b.Request()
		req.MetadataVersion = 1<<62 - 1
		r := s.Heartbeat("orders", "bogus", req)
		checkAnswer(t, "b", r)
		if r.Status != protocol.StatusInvalidRequest {
			t.Fatalf("bogus version: %+v", r)
		}
		c := member("c", "bogus", "c-1")
		converge(t, s, b, c)
		var g protocol.GroupResponse
		s.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/bogus", nil, http.StatusOK, &g)
		if g.MetadataVersion > 1000 {
			t.Fatalf("group version moved to %d", g.MetadataVersion)
		}
	})

	t.Run("no delete while a member drains; a re-created group continues above", func(t *testing.T) {
		d := member("d", "deleted", "d-1")
		converge(t, s, d)
		tokens := epochs(d.Last)
		d.HoldRevokes = true
		if r := d.Leave(s); r.Status != protocol.StatusOK {
			t.Fatalf("leave: %+v", r)
		}
		del := map[string]any{"requestedBy": "test", "reason": "test"}
		path := protocol.BasePath + "/streams/orders/groups/deleted"
		status, raw := s.Do(http.MethodDelete, path, del)
		if status != http.StatusConflict || !strings.Contains(string(raw), string(protocol.CodeGroupHasActiveMembers)) {
			t.Fatalf("delete while draining: %d %s", status, raw)
		}
		var g protocol.GroupResponse
		s.JSON(http.MethodGet, path, nil, http.StatusOK, &g)
		// The leaver's lease lapses: nothing holds anything any more.
		if !poll.Wait(handoffLease+10*time.Second, 200*time.Millisecond, func() bool {
			status, raw = s.Do(http.MethodDelete, path, del)
			return status == http.StatusOK
		}) {
			t.Fatalf("delete after the leaver's lease: %d %s", status, raw)
		}
		// A heartbeat of the deleted group's member tells it the group is gone
		// or registers it again; a join registers it again above the old one.
		e := member("e", "deleted", "e-1")
		r := beat(t, s, e)
		if r.Status != protocol.StatusOK {
			t.Fatalf("join into the re-created group: %+v", r)
		}
		if r.MetadataVersion <= g.MetadataVersion || r.GroupEpoch < g.GroupEpoch {
			t.Fatalf("re-created group at version %d epoch %d; the deleted one was at %d %d", r.MetadataVersion, r.GroupEpoch, g.MetadataVersion, g.GroupEpoch)
		}
		for sh, e := range epochs(r) {
			if e <= tokens[sh] {
				t.Errorf("shard %d: ownerEpoch %d in the re-created group, %d before", sh, e, tokens[sh])
			}
		}
	})

	t.Run("a member fenced by the timer keeps its shards until its lease lapses", func(t *testing.T) {
		f := member("f", "timer", "f-1")
		converge(t, s, f)
		f.HoldRevokes = true
		h := member("h", "timer", "h-1")
		beat(t, s, h)
		// f is told to give two shards up: its deadline starts now. It then
		// falls silent, so it never hears of the fence.
		told := time.Now()
		beat(t, s, f)
		if len(f.Revoking) != 2 {
			t.Fatalf("f was not told to give up shards: %+v", f.Last)
		}
		fencedAt := told.Add(handoffRebalance + 300*time.Millisecond)
		keepAlive(t, s, fencedAt, h)
		// f held all four (two owned, two draining): h, whose target they
		// all are now, may read none of them yet.
		if r := beat(t, s, h); len(r.Assignment.AssignedShards) != 0 || len(r.Assignment.PendingShards) != 4 {
			t.Fatalf("h got f's shards at f's fence, before f's lease lapsed: %+v", r)
		}
		var ms protocol.MembersResponse
		s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/orders/groups/timer/members", nil, http.StatusOK, &ms)
		for _, m := range ms.Members {
			if m.MemberID == "f" && m.State != protocol.MemberFenced {
				t.Fatalf("f is %s after its deadline", m.State)
			}
		}
		// Right after f's lease (from its last OK) lapses, they move.
		keepAlive(t, s, told.Add(handoffLease+200*time.Millisecond), h)
		r := beat(t, s, h)
		if len(r.Assignment.AssignedShards) != 4 {
			t.Fatalf("h after f's lease lapsed: %+v", r)
		}
	})

	t.Run("a member fenced at its deadline that is told frees its shards when it rejoins", func(t *testing.T) {
		f := member("f", "told", "f-1")
		converge(t, s, f)
		f.HoldRevokes = true
		h := member("h", "told", "h-1")
		beat(t, s, h)
		beat(t, s, f)
		if !poll.Wait(handoffRebalance+10*time.Second, 300*time.Millisecond, func() bool {
			if f.Last.Status == protocol.StatusFencedMemberEpoch {
				return true
			}
			beat(t, s, f)
			beat(t, s, h)
			return f.Last.Status == protocol.StatusFencedMemberEpoch
		}) {
			t.Fatalf("f never told of its fence: %+v", f.Last)
		}
		// f stopped reading on the answer; its rejoin frees the shards.
		f.HoldRevokes = false
		if r := beat(t, s, f); r.Status != protocol.StatusOK {
			t.Fatalf("f's rejoin: %+v", r)
		}
		converge(t, s, f, h)
	})

	t.Run("reference client: join, steady heartbeats, leave, 3-member rebalance", func(t *testing.T) {
		a, b, c := member("py-a", "python", ""), member("py-b", "python", ""), member("py-c", "python", "")
		converge(t, s, a)
		for range 3 {
			if r := beat(t, s, a); r.Status != protocol.StatusOK || len(a.Owned) != 4 {
				t.Fatalf("steady: %+v", r)
			}
		}
		converge(t, s, a, b, c)
		total := len(a.Owned) + len(b.Owned) + len(c.Owned)
		if total != 4 {
			t.Fatalf("3 members own %d shards", total)
		}
		if r := c.Leave(s); r.Status != protocol.StatusOK || r.MemberEpoch != protocol.EpochLeave {
			t.Fatalf("leave: %+v", r)
		}
		converge(t, s, a, b)
		if len(a.Owned) != 2 || len(b.Owned) != 2 {
			t.Fatalf("after the leave: a %v b %v", a.Owned, b.Owned)
		}
	})

	t.Run("unknown stream and group are told apart", func(t *testing.T) {
		m := coordtest.NewMember("z", "nostream", "g")
		m.Epoch = 3
		r := s.Heartbeat("nostream", "g", m.Request())
		if r.Status != protocol.StatusUnknownMemberID || r.ErrorCode != protocol.CodeStreamNotFound {
			t.Fatalf("unknown stream: %+v", r)
		}
		checkAnswer(t, "z", r)
		m = coordtest.NewMember("z", "orders", "never-registered")
		m.Epoch = 3
		r = s.Heartbeat("orders", "never-registered", m.Request())
		if r.Status != protocol.StatusUnknownMemberID || r.ErrorCode != protocol.CodeGroupNotFound {
			t.Fatalf("unknown group: %+v", r)
		}
	})
}

func mapsEqual(a, b map[int]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
