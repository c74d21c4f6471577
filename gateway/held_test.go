package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/poll"
)

// heldAnswer is the outcome of a heartbeat posted in the background.
type heldAnswer struct {
	resp protocol.HeartbeatResponse
	at   time.Time
	err  error
}

// postBackground posts req for its member from another goroutine, so that
// the test can act while the coordinator holds the answer.
func postBackground(s *coordtest.Server, prefix, group string, req protocol.HeartbeatRequest) <-chan heldAnswer {
	out := make(chan heldAnswer, 1)
	go func() {
		var a heldAnswer
		defer func() { a.at = time.Now(); out <- a }()
		raw, err := json.Marshal(req)
		if err != nil {
			a.err = err
			return
		}
		url := s.URL + protocol.BasePath + "/streams/" + prefix + "/groups/" + group + "/members/" + req.MemberID + "/heartbeat"
		httpResp, err := http.Post(url, "application/json", bytes.NewReader(raw))
		if err != nil {
			a.err = err
			return
		}
		defer httpResp.Body.Close()
		if httpResp.StatusCode != http.StatusOK {
			a.err = fmt.Errorf("status %d", httpResp.StatusCode)
			return
		}
		a.err = json.NewDecoder(httpResp.Body).Decode(&a.resp)
	}()
	return out
}

// postParked is postBackground for a heartbeat asking to be held that
// returns once the group has taken it (recorded it and, as it tells the
// member nothing new, parked its answer), so that what the test does next
// reaches the group after it.
func postParked(t *testing.T, s *coordtest.Server, prefix, group string, req protocol.HeartbeatRequest) <-chan heldAnswer {
	t.Helper()
	before := lastHeartbeats(t, s, prefix, group, req.MemberID)
	out := postBackground(s, prefix, group, req)
	awaitTaken(t, s, prefix, group, before)
	return out
}

// lastHeartbeats is lastHeartbeat of each of ids, for awaitTaken.
func lastHeartbeats(t *testing.T, s *coordtest.Server, prefix, group string, ids ...string) map[string]time.Time {
	t.Helper()
	out := make(map[string]time.Time, len(ids))
	for _, id := range ids {
		out[id] = lastHeartbeat(t, s, prefix, group, id)
	}
	return out
}

// awaitTaken polls the group until it has recorded a heartbeat of every
// member of before later than the time it has there, failing after 10s.
func awaitTaken(t *testing.T, s *coordtest.Server, prefix, group string, before map[string]time.Time) {
	t.Helper()
	for id, at := range before {
		poll.Until(t, 10*time.Second, func() bool { return lastHeartbeat(t, s, prefix, group, id).After(at) },
			fmt.Sprintf("the group to take %s's heartbeat", id))
	}
}

// lastHeartbeat is when the group last recorded a heartbeat of member id
// (zero when never). The group's actor answers it, so a heartbeat it
// reports was handled before: taken, and held or answered.
func lastHeartbeat(t *testing.T, s *coordtest.Server, prefix, group, id string) time.Time {
	t.Helper()
	ms, err := s.Coord.Members(context.Background(), prefix, group)
	if err != nil {
		t.Fatalf("members of %s/%s: %v", prefix, group, err)
	}
	for _, m := range ms.Members {
		if m.MemberID == id && m.LastHeartbeatAt != nil {
			return *m.LastHeartbeatAt
		}
	}
	return time.Time{}
}

func wait(t *testing.T, ch <-chan heldAnswer, within time.Duration) heldAnswer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("held heartbeat: %v", a.err)
		}
		return a
	case <-time.After(within):
		t.Fatalf("held heartbeat not answered within %v", within)
		return heldAnswer{}
	}
}

// settled is a member that converged alone on a stream of shards shards.
func settled(t *testing.T, s *coordtest.Server, shards int) *coordtest.Member {
	t.Helper()
	s.CreateStream("orders", shards)
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	coordtest.Converge(t, s, 5, a)
	return a
}

func TestHeldHeartbeatWithNothingNewIsAnsweredAfterWaitMs(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	a := settled(t, s, 4)

	req := a.Request()
	req.WaitMs = 400
	start := time.Now()
	got := wait(t, postBackground(s, "orders", "orders", req), 5*time.Second)
	took := got.at.Sub(start)
	if took < 400*time.Millisecond || took > 1500*time.Millisecond {
		t.Fatalf("held heartbeat with nothing new answered after %v, want about 400ms", took)
	}
	if got.resp.Status != protocol.StatusOK || got.resp.MemberEpoch != a.Epoch ||
		!slices.Equal(protocol.Indexes(got.resp.Assignment.AssignedShards), a.Owned) {
		t.Fatalf("held answer %+v, member epoch %d owns %v", got.resp, a.Epoch, a.Owned)
	}
	a.Apply(req, got.resp)

	// A reference client (no waitMs) is answered at once, as before.
	start = time.Now()
	if resp := a.Beat(s); resp.Status != protocol.StatusOK || time.Since(start) > 300*time.Millisecond {
		t.Fatalf("heartbeat without waitMs: %s after %v", resp.Status, time.Since(start))
	}

	// waitMs beyond the answered interval is held no longer than it.
	req = a.Request()
	req.WaitMs = 60_000
	start = time.Now()
	got = wait(t, postBackground(s, "orders", "orders", req), 10*time.Second)
	if took := got.at.Sub(start); took < protocol.DefaultHeartbeatInterval-100*time.Millisecond || took > protocol.DefaultHeartbeatInterval+time.Second {
		t.Fatalf("waitMs 60000 held %v, want the heartbeat interval %v", took, protocol.DefaultHeartbeatInterval)
	}

	// The two held answers are timed apart from those answered at once,
	// so that their wait does not read as a slow coordinator.
	families := scrape(t, s, "/metrics")
	held := histogramOf(t, families, "rscoord_heartbeat_duration_seconds", "held", "true")
	atOnce := histogramOf(t, families, "rscoord_heartbeat_duration_seconds", "held", "false")
	if held.GetSampleCount() != 2 || held.GetSampleSum() < 0.3+protocol.DefaultHeartbeatInterval.Seconds() {
		t.Errorf(`held="true": %d answers taking %.2f s, want the 2 held ones`, held.GetSampleCount(), held.GetSampleSum())
	}
	if atOnce.GetSampleCount() == 0 {
		t.Error(`held="false" counted none of the heartbeats answered at once`)
	}
}

// histogramOf is the histogram of family name whose label is value.
func histogramOf(t *testing.T, families map[string]*dto.MetricFamily, name, label, value string) *dto.Histogram {
	t.Helper()
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value && m.Histogram != nil {
				return m.Histogram
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return nil
}

func TestHeldHeartbeatIsAnsweredWhenAJoinShrinksItsTarget(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 6)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 8, a, b)
	if len(a.Owned) != 3 {
		t.Fatalf("a owns %v, want 3 shards", a.Owned)
	}

	req := a.Request()
	req.WaitMs = 3000
	held := postBackground(s, "orders", "orders", req)
	// The answer must still be held: it has nothing new yet.
	select {
	case got := <-held:
		t.Fatalf("held heartbeat answered at once: %+v (%v)", got.resp, got.err)
	case <-time.After(300 * time.Millisecond):
	}

	c := coordtest.NewMember("c", "orders", "orders")
	joined := time.Now()
	c.Beat(s)
	got := wait(t, held, 3*time.Second)
	if took := got.at.Sub(joined); took > 300*time.Millisecond {
		t.Fatalf("held heartbeat answered %v after the join, want within 300ms", took)
	}
	assigned := protocol.Indexes(got.resp.Assignment.AssignedShards)
	if got.resp.Status != protocol.StatusOK || len(assigned) >= len(a.Owned) || got.resp.MemberEpoch <= req.MemberEpoch {
		t.Fatalf("held answer after the join: %+v; a owned %v", got.resp, a.Owned)
	}
	a.Apply(req, got.resp)
	coordtest.CheckNoOverlap(t, a, b, c)
	coordtest.Converge(t, s, 8, a, b, c)
}

func TestHeldHeartbeatIsReleasedByTheNextOneAndByShutdown(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	a := settled(t, s, 2)

	first := a.Request()
	first.WaitMs = 3000
	held := postParked(t, s, "orders", "orders", first)
	// The member asks again (its client gave up): the older request is
	// answered RETRY at once, the newer one normally.
	second := a.Request()
	if resp := s.Heartbeat("orders", "orders", second); resp.Status != protocol.StatusOK {
		t.Fatalf("second heartbeat: %+v", resp)
	}
	if got := wait(t, held, time.Second); got.resp.Status != protocol.StatusRetry {
		t.Fatalf("superseded held heartbeat answered %s, want RETRY", got.resp.Status)
	}

	third := a.Request()
	third.WaitMs = 3000
	held = postParked(t, s, "orders", "orders", third)
	start := time.Now()
	s.Coord.BeginShutdown()
	got := wait(t, held, time.Second)
	if got.resp.Status != protocol.StatusRetry || got.at.Sub(start) > 500*time.Millisecond {
		t.Fatalf("held heartbeat at shutdown: %s after %v, want RETRY at once", got.resp.Status, got.at.Sub(start))
	}
}

// The held budget is one for the whole server: each held answer keeps a
// connection busy, whichever group it belongs to.
func TestHeldHeartbeatsShareOneServerWideBudget(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{MaxHeldHeartbeats: 1})
	a, b := twoStreams(t, s)

	reqA := a.Request()
	reqA.WaitMs = 1500
	heldA := postParked(t, s, "orders", "orders", reqA) // a's heartbeat is parked first

	// The budget is spent: b, in another group, is answered at once.
	reqB := b.Request()
	reqB.WaitMs = 1500
	start := time.Now()
	got := wait(t, postBackground(s, "payments", "payments", reqB), 5*time.Second)
	if took := got.at.Sub(start); took > 700*time.Millisecond || got.resp.Status != protocol.StatusOK {
		t.Fatalf("b answered %s after %v with a's heartbeat held, want OK at once", got.resp.Status, took)
	}
	b.Apply(reqB, got.resp)
	if ans := wait(t, heldA, 5*time.Second); ans.at.Sub(start) < 800*time.Millisecond {
		t.Fatalf("a was answered after %v, want it held for its wait", ans.at.Sub(start))
	} else {
		a.Apply(reqA, ans.resp)
	}

	// a's answer gave its unit back: b is held now.
	reqB = b.Request()
	reqB.WaitMs = 600
	start = time.Now()
	got = wait(t, postBackground(s, "payments", "payments", reqB), 5*time.Second)
	if took := got.at.Sub(start); took < 600*time.Millisecond {
		t.Fatalf("b answered after %v with nothing held, want it held about 600ms", took)
	}
}

// A join that leaves a held member's shards as they are moves the group's
// epoch and metadata version, and that alone must not release the answer:
// otherwise every join would wake every held member of the group at once.
func TestHeldHeartbeatStaysHeldWhenAJoinLeavesItsShards(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 8, a, b)
	if len(a.Owned) != 1 || len(b.Owned) != 1 {
		t.Fatalf("a owns %v, b owns %v: want one shard each", a.Owned, b.Owned)
	}

	req := a.Request()
	req.WaitMs = 1500
	start := time.Now()
	held := postParked(t, s, "orders", "orders", req)

	// Two shards, three members: the newcomer gets nothing.
	c := coordtest.NewMember("c", "orders", "orders")
	if resp := c.Beat(s); resp.Status != protocol.StatusOK || len(resp.Assignment.AssignedShards)+len(resp.Assignment.PendingShards) != 0 {
		t.Fatalf("c's join: %+v, want OK with no shards", resp)
	}
	got := wait(t, held, 5*time.Second)
	if took := got.at.Sub(start); took < 1400*time.Millisecond {
		t.Fatalf("held heartbeat answered %v after it was sent, want after its 1.5 s wait: a join that leaves its shards released it", took)
	}
	if got.resp.Status != protocol.StatusOK || !slices.Equal(protocol.Indexes(got.resp.Assignment.AssignedShards), a.Owned) {
		t.Fatalf("held answer %+v, a owned %v", got.resp, a.Owned)
	}
	if got.resp.MemberEpoch <= req.MemberEpoch {
		t.Fatalf("held answer carries epoch %d, request had %d: the join's epoch must come with it, computed afresh", got.resp.MemberEpoch, req.MemberEpoch)
	}
	a.Apply(req, got.resp)
	// Its next heartbeat, with the epoch it was told, is current.
	if resp := a.Beat(s); resp.Status != protocol.StatusOK {
		t.Fatalf("a's heartbeat after the held answer: %+v", resp)
	}
	coordtest.CheckNoOverlap(t, a, b, c)
}

// A held answer waiting for shards another member still holds is released
// as soon as that member reports them given up, and a member that only
// catches up with the group's epoch releases nobody's.
func TestHeldHeartbeatIsAnsweredWhenItsShardsAreGivenUp(t *testing.T) {
	t.Parallel()
	// A member with pending shards is held at most the reconcile
	// interval: long enough here to tell a release from its end.
	s := coordtest.Start(t, "", coordtest.Options{Group: assign.Config{ReconcileInterval: 3 * time.Second}})
	a := settled(t, s, 4)
	b := coordtest.NewMember("b", "orders", "orders")
	b.Beat(s) // joins: half of a's shards are b's target
	a.Beat(s) // a learns it must give two up (it reports them next time)
	b.Beat(s)
	if len(b.Last.Assignment.PendingShards) != 2 || len(b.Owned) != 0 || len(a.Revoking) != 2 {
		t.Fatalf("b pending %v owns %v, a revoking %v: want 2, none, 2", b.Last.Assignment.PendingShards, b.Owned, a.Revoking)
	}

	req := b.Request()
	req.WaitMs = 3000
	held := postBackground(s, "orders", "orders", req)
	select {
	case got := <-held:
		t.Fatalf("b's heartbeat waiting for its shards answered at once: %+v", got.resp)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	if resp := a.Beat(s); resp.Status != protocol.StatusOK {
		t.Fatalf("a reports its shards revoked: %+v", resp)
	}
	got := wait(t, held, 2*time.Second)
	if took := got.at.Sub(start); took > 500*time.Millisecond || len(got.resp.Assignment.AssignedShards) != 2 {
		t.Fatalf("b answered %v after a gave its shards up, assigned %v: want 2 shards at once", took, got.resp.Assignment.AssignedShards)
	}
}

// A held heartbeat behind the group (a join moved the epochs, not its
// shards) is held for its wait like a current one and answered with the
// new epoch (docs/protocol.md §9.5: an epoch alone is no news).
func TestHeldHeartbeatBehindInEpochIsHeld(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	a := settled(t, s, 1)
	b := coordtest.NewMember("b", "orders", "orders")
	if resp := b.Beat(s); resp.Status != protocol.StatusOK || len(resp.Assignment.AssignedShards)+len(resp.Assignment.PendingShards) != 0 {
		t.Fatalf("b's join: %+v", resp)
	}
	req := a.Request() // a's epoch is the one before b's join
	req.WaitMs = 1000
	start := time.Now()
	got := wait(t, postBackground(s, "orders", "orders", req), 5*time.Second)
	if took := got.at.Sub(start); took < 900*time.Millisecond || got.resp.Status != protocol.StatusOK {
		t.Fatalf("a, behind by b's join only, answered %s after %v: want OK after its wait", got.resp.Status, took)
	}
	if got.resp.MemberEpoch <= req.MemberEpoch || !slices.Equal(protocol.Indexes(got.resp.Assignment.AssignedShards), []int{0}) {
		t.Fatalf("a's held answer: epoch %d (request %d), assigned %v: want a newer epoch and shard 0", got.resp.MemberEpoch, req.MemberEpoch, got.resp.Assignment.AssignedShards)
	}
}

// TestHeldHeartbeatsGauge: rscoord_held_heartbeats counts the heartbeats
// held right now, across groups: 0, one per parked answer, 0 once answered.
func TestHeldHeartbeatsGauge(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	a, b := twoStreams(t, s)
	held := func() float64 { return metricValue(scrape(t, s, "/metrics"), metrics.HeldHeartbeats, nil) }
	if got := held(); got != 0 {
		t.Fatalf("%s = %v with nothing held, want 0", metrics.HeldHeartbeats, got)
	}
	reqA, reqB := a.Request(), b.Request()
	reqA.WaitMs, reqB.WaitMs = 800, 800
	heldA := postParked(t, s, "orders", "orders", reqA)
	heldB := postParked(t, s, "payments", "payments", reqB)
	if got := held(); got != 2 {
		t.Fatalf("%s = %v with a heartbeat held in each of two groups, want 2", metrics.HeldHeartbeats, got)
	}
	a.Apply(reqA, wait(t, heldA, 5*time.Second).resp)
	b.Apply(reqB, wait(t, heldB, 5*time.Second).resp)
	if got := held(); got != 0 {
		t.Fatalf("%s = %v once both were answered, want 0", metrics.HeldHeartbeats, got)
	}
}

// twoStreams creates the streams orders and payments (two shards each)
// with one converged member each: a in orders, b in payments.
func twoStreams(t *testing.T, s *coordtest.Server) (a, b *coordtest.Member) {
	t.Helper()
	s.CreateStream("orders", 2)
	s.CreateStream("payments", 2)
	a = coordtest.NewMember("a", "orders", "orders")
	b = coordtest.NewMember("b", "payments", "payments")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 5, a)
	coordtest.Converge(t, s, 5, b)
	return a, b
}
