package assign

import (
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestOwnershipValidation: a report claiming a shard outside the member's
// authority fences the member (a zombie must stop reading at once); the
// other member is not disturbed.
func TestOwnershipValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(r *protocol.HeartbeatRequest)
		fenced bool
	}{
		{"own shards", func(r *protocol.HeartbeatRequest) {}, false},
		{"fewer shards", func(r *protocol.HeartbeatRequest) { r.OwnedShards = protocol.Shards([]int{1}) }, false},
		{"duplicates and disorder", func(r *protocol.HeartbeatRequest) { r.OwnedShards = protocol.Shards([]int{2, 0, 2, 1}) }, false},
		{"owning another member's shard", func(r *protocol.HeartbeatRequest) { r.OwnedShards = protocol.Shards([]int{0, 1, 2, 3}) }, true},
		{"owning a shard that does not exist", func(r *protocol.HeartbeatRequest) { r.OwnedShards = protocol.Shards([]int{0, 9}) }, true},
		{"owning a negative shard", func(r *protocol.HeartbeatRequest) { r.OwnedShards = protocol.Shards([]int{-1}) }, true},
		{"revoking another member's shard", func(r *protocol.HeartbeatRequest) {
			r.RevokingShards = []protocol.RevokingShard{revokingShard(4, protocol.RevokeRevoking, 1)}
		}, true},
		{"terminal report of another member's shard is ignored", func(r *protocol.HeartbeatRequest) {
			r.RevokingShards = []protocol.RevokingShard{revokingShard(4, protocol.RevokeRevoked, 0)}
		}, false},
		{"REVOKED with in-flight work is not terminal", func(r *protocol.HeartbeatRequest) {
			r.RevokingShards = []protocol.RevokingShard{revokingShard(4, protocol.RevokeRevoked, 2)}
		}, true},
		{"progress on another member's shard", func(r *protocol.HeartbeatRequest) {
			r.ShardProgress = []protocol.ShardProgress{{Shard: protocol.Shard{ShardIndex: 5}}}
		}, true},
		{"progress on own shard", func(r *protocol.HeartbeatRequest) {
			r.ShardProgress = []protocol.ShardProgress{{Shard: protocol.Shard{ShardIndex: 2}}}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _, now := stable(t, 6, "a", "b")
			a := g.Members["a"]
			if !slices.Equal(a.Current, []int{0, 1, 2}) {
				t.Fatalf("setup: a holds %v", a.Current)
			}
			epoch, groupEpoch := a.Epoch, g.GroupEpoch
			req := hb("a", epoch, g.MetadataVersion, []int{0, 1, 2})
			tc.edit(req)
			res := Heartbeat(g, req, now.Add(time.Second), testConfig())
			if !tc.fenced {
				if res.Response.Status != protocol.StatusOK {
					t.Fatalf("answered %+v", res.Response)
				}
				return
			}
			if res.Response.Status != protocol.StatusFencedMemberEpoch || a.State != protocol.MemberFenced ||
				a.Epoch != epoch+1 || g.GroupEpoch != groupEpoch+1 || !res.Persist {
				t.Fatalf("not fenced: %+v %+v", res.Response, a)
			}
			if !slices.Equal(g.Target["b"], []int{0, 1, 2, 3, 4, 5}) || !slices.Equal(g.Members["b"].Current, []int{3, 4, 5}) {
				t.Errorf("b after a was fenced: target %v current %v", g.Target["b"], g.Members["b"].Current)
			}
		})
	}
}

// TestAuthorityIncludesAssignable: a member may report a shard it was never
// told about yet if it is in its target and nobody holds it (e.g. the
// answer granting it was lost but the retry's answer was not).
func TestAuthorityIncludesAssignable(t *testing.T) {
	t.Parallel()
	g, _, now := stable(t, 4, "a")
	res := Heartbeat(g, joinReq("b"), now, testConfig())
	if len(assigned(res.Response)) != 0 {
		t.Fatal("setup")
	}
	a := g.Members["a"]
	// a hears it must give 2 and 3 up, and lets go of both entirely in one
	// report.
	ra := Heartbeat(g, hb("a", a.Epoch, a.MetadataVersion, []int{0, 1, 2, 3}), now, testConfig()).Response
	Heartbeat(g, hb("a", ra.MemberEpoch, ra.MetadataVersion, []int{0, 1}), now, testConfig())
	// b reports owning 3 before any answer granted it: inside target − blocked.
	r := Heartbeat(g, hb("b", g.Members["b"].Epoch, g.MetadataVersion, []int{3}), now, testConfig()).Response
	if r.Status != protocol.StatusOK || !slices.Equal(assigned(r), []int{2, 3}) {
		t.Fatalf("b: %+v", r)
	}
}
