package gateway_test

import (
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/redisops"
)

// With Redis frozen (SIGSTOP), a join that registers a new group waits at
// most about a second (RETRY is fine), and heartbeats of an existing group
// of the same stream are answered as usual: they never wait for Redis.
func TestFrozenRedisDelaysNoHeartbeat(t *testing.T) {
	rs := redistest.Standalone(t)
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rs.Client()), AutoCreateGroups: true})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	coordtest.Converge(t, s, 5, a)

	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Resume() })

	x := coordtest.NewMember("x", "orders", "fresh")
	start := time.Now()
	resp := x.Beat(s)
	if took := time.Since(start); took > 1500*time.Millisecond || (resp.Status != protocol.StatusRetry && resp.Status != protocol.StatusOK) {
		t.Fatalf("join registering a group with Redis frozen: %s after %v, want an answer within 1.5s", resp.Status, took)
	}
	start = time.Now()
	resp = a.Beat(s)
	if took := time.Since(start); took > 500*time.Millisecond || resp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat of an existing group with Redis frozen: %s after %v, want OK within 0.5s", resp.Status, took)
	}

	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	if !poll.Soon(20*time.Second, func() bool { return x.Last.Status == protocol.StatusOK || x.Beat(s).Status == protocol.StatusOK }) {
		t.Fatalf("join after Redis came back: %+v", x.Last)
	}
}
