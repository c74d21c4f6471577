package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// TestHeldHeartbeatsBlackBox checks held heartbeats (waitMs) against the
// real coordinator binary with its default timings, over HTTP: one with
// nothing new is answered once its wait is over, and one is answered at
// once (within a third of the 3 s it asked to be held), with fewer shards,
// when another member's join changes its target.
func TestHeldHeartbeatsBlackBox(t *testing.T) {
	b := build(t)
	_, url := startCoordinator(t, b.coordinator, filepath.Join(t.TempDir(), "coord"),
		"--heartbeat-interval", protocol.DefaultHeartbeatInterval.String(), "--member-lease", defaultLease.String())
	remote(t, url).CreateStream("orders", 6)
	s := remote(t, url).As(memberAuth()) // the members heartbeat as a MEMBER
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	coordtest.Converge(t, s, 8, a)

	type answer struct {
		resp protocol.HeartbeatResponse
		at   time.Time
	}
	post := func(req protocol.HeartbeatRequest) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			resp := s.Heartbeat("orders", "orders", req)
			out <- answer{resp, time.Now()}
		}()
		return out
	}

	// Nothing new: answered once the wait is over.
	req := a.Request()
	req.WaitMs = 1000
	start := time.Now()
	var got answer
	select {
	case got = <-post(req):
	case <-time.After(10 * time.Second):
		t.Fatal("held heartbeat never answered")
	}
	// Not before the wait is over; after it, by less than half an interval
	// (a loaded machine answers late, but not a whole hold late).
	if took := got.at.Sub(start); took < 1000*time.Millisecond || took > 1000*time.Millisecond+protocol.DefaultHeartbeatInterval/2 {
		t.Fatalf("held heartbeat with nothing new answered after %v, want about its waitMs 1s", took)
	}
	if got.resp.Status != protocol.StatusOK || len(got.resp.Assignment.AssignedShards) != 6 {
		t.Fatalf("held answer: %+v", got.resp)
	}
	a.Apply(req, got.resp)

	// Another member's join: answered at once with fewer shards.
	req = a.Request()
	req.WaitMs = protocol.DefaultHeartbeatInterval.Milliseconds()
	held := post(req)
	select {
	case got := <-held:
		t.Fatalf("held heartbeat with nothing new answered at once: %+v", got.resp)
	case <-time.After(500 * time.Millisecond):
	}
	c := coordtest.NewMember("c", "orders", "orders")
	joined := time.Now()
	c.Beat(s)
	select {
	case got = <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("held heartbeat never answered after the join")
	}
	if took, limit := got.at.Sub(joined), protocol.DefaultHeartbeatInterval/3; took > limit {
		t.Fatalf("held heartbeat answered %v after the join, want at once (within %v of the %v hold)", took, limit, protocol.DefaultHeartbeatInterval)
	}
	if got.resp.Status != protocol.StatusOK || len(got.resp.Assignment.AssignedShards) >= 6 || got.resp.MemberEpoch <= req.MemberEpoch {
		t.Fatalf("held answer after the join: %+v", got.resp)
	}
	a.Apply(req, got.resp)
	coordtest.CheckNoOverlap(t, a, c)
	coordtest.Converge(t, s, 8, a, c)
}
