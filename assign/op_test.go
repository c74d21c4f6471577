package assign

import (
	"fmt"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestPersistOnlyForDurableChanges: what a heartbeat reports about the
// process (capacity, progress, its version) is not durable; what decides
// what others are told is.
func TestPersistOnlyForDurableChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(r *protocol.HeartbeatRequest)
		persist bool
	}{
		{"steady", func(r *protocol.HeartbeatRequest) {}, false},
		{"capacity", func(r *protocol.HeartbeatRequest) {
			r.RuntimeConsumerCapacity = protocol.ConsumerCapacity{RuntimeMaxConcurrency: 9}
		}, false},
		{"progress", func(r *protocol.HeartbeatRequest) { r.ShardProgress[0].LastAckedID = "9-9" }, false},
		{"older reported version", func(r *protocol.HeartbeatRequest) { r.MetadataVersion-- }, false},
		{"owned in another order", func(r *protocol.HeartbeatRequest) {
			r.OwnedShards[0], r.OwnedShards[1] = r.OwnedShards[1], r.OwnedShards[0]
		}, false},
		{"member name", func(r *protocol.HeartbeatRequest) { r.MemberName = "renamed" }, true},
		{"owns less", func(r *protocol.HeartbeatRequest) { r.OwnedShards = r.OwnedShards[:1] }, true},
		{"revoking", func(r *protocol.HeartbeatRequest) {
			r.RevokingShards = []protocol.RevokingShard{revokingShard(r.OwnedShards[1].ShardIndex, protocol.RevokeRevoking, 1)}
			r.OwnedShards = r.OwnedShards[:1]
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, cs, now := stable(t, 6, "a", "b")
			req := cs[0].sim.request()
			tc.edit(req)
			before, version := durable(g), g.MetadataVersion
			res := Heartbeat(g, req, now.Add(time.Second), testConfig())
			if res.Response.Status != protocol.StatusOK {
				t.Fatalf("answered %+v", res.Response)
			}
			if res.Persist != tc.persist || (durable(g) != before) != tc.persist {
				t.Errorf("persist %v, durable change %v, want %v", res.Persist, durable(g) != before, tc.persist)
			}
			if g.MetadataVersion != version {
				t.Errorf("version bumped %d → %d", version, g.MetadataVersion)
			}
		})
	}
}

// TestEventsDeterministic: same inputs, same events and state, whatever the
// map order.
func TestEventsDeterministic(t *testing.T) {
	t.Parallel()
	run := func() string {
		g := NewGroup("orders", "billing", 5, t0)
		for i := 0; i < 6; i++ {
			Heartbeat(g, joinReq(fmt.Sprintf("m%d", i)), t0, testConfig())
		}
		res := Tick(g, t0.Add(time.Hour), testConfig())
		return fmt.Sprint(res.Events, durable(g))
	}
	first := run()
	for i := 0; i < 20; i++ {
		if got := run(); got != first {
			t.Fatalf("run %d differs:\n%s\n%s", i, got, first)
		}
	}
}
