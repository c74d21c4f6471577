package assign

import (
	"slices"
	"testing"

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
