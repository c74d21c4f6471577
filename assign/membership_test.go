package assign

import (
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestLeave(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	draining := func(s ...int) []protocol.RevokingShard {
		var out []protocol.RevokingShard
		for _, x := range s {
			out = append(out, revokingShard(x, protocol.RevokeDraining, 2))
		}
		return out
	}
	tests := []struct {
		name         string
		reqs         func(g *Group) []*protocol.HeartbeatRequest // the last one is checked
		status       protocol.Status
		epoch        int64 // answered memberEpoch; 99 = the stored epoch
		wantState    protocol.MemberState
		wantRevoking []int
		persist      bool
	}{
		{
			name:      "leave with nothing left",
			reqs:      func(g *Group) []*protocol.HeartbeatRequest { return []*protocol.HeartbeatRequest{leaveReq(g, "a")} },
			status:    protocol.StatusOK,
			epoch:     -1,
			wantState: protocol.MemberLeaving,
			persist:   true,
		},
		{
			name: "leave while draining",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{leaveReq(g, "a", draining(0, 1)...)}
			},
			status: protocol.StatusOK, epoch: -1, wantState: protocol.MemberLeaving, wantRevoking: []int{0, 1}, persist: true,
		},
		{
			name: "owned shards in a leave are not kept",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{hb("a", -1, g.MetadataVersion, []int{0, 1, 2})}
			},
			status: protocol.StatusOK, epoch: -1, wantState: protocol.MemberLeaving, persist: true,
		},
		{
			name: "draining someone else's shard is dropped, not fenced",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{leaveReq(g, "a", draining(0, 5)...)}
			},
			status: protocol.StatusOK, epoch: -1, wantState: protocol.MemberLeaving, wantRevoking: []int{0}, persist: true,
		},
		{
			name: "repeated leave answered the same",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{leaveReq(g, "a", draining(0, 1)...), leaveReq(g, "a", draining(0, 1)...)}
			},
			status: protocol.StatusOK, epoch: -1, wantState: protocol.MemberLeaving, wantRevoking: []int{0, 1}, persist: false,
		},
		{
			name: "repeated leave reports progress",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{leaveReq(g, "a", draining(0, 1)...),
					leaveReq(g, "a", revokingShard(0, protocol.RevokeRevoked, 0), revokingShard(1, protocol.RevokeDraining, 1), revokingShard(2, protocol.RevokeDraining, 1))}
			},
			status: protocol.StatusOK, epoch: -1, wantState: protocol.MemberLeaving, wantRevoking: []int{1}, persist: true,
		},
		{
			name: "leave of an unknown member",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{leaveReq(g, "nobody")}
			},
			// a untouched
			status: protocol.StatusUnknownMemberID, epoch: -1, wantState: protocol.MemberActive, wantRevoking: nil, persist: false,
		},
		{
			name: "leave of a fenced member",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{hb("a", 1, g.MetadataVersion, []int{5}), leaveReq(g, "a")}
			},
			status: protocol.StatusFencedMemberEpoch, epoch: 99, wantState: protocol.MemberFenced, persist: false,
		},
		{
			name: "rejoin after leaving",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{leaveReq(g, "a", draining(0, 1)...), joinReq("a")}
			},
			status: protocol.StatusOK, epoch: 99, wantState: protocol.MemberActive, persist: true,
		},
		{
			// Sent before a's process joined: the late copy of an
			// earlier incarnation's leave (its instanceId told apart only
			// by requestSeq, which none sent). Answered as a leave,
			// nothing changes.
			name: "leave older than the join of the current incarnation",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{hb("a", -1, g.Members["a"].JoinVersion-1, nil)}
			},
			status: protocol.StatusOK, epoch: -1, wantState: protocol.MemberActive, persist: false,
		},
		{
			name: "leave during a correction round",
			reqs: func(g *Group) []*protocol.HeartbeatRequest {
				return []*protocol.HeartbeatRequest{hb("b", g.Members["b"].Epoch, g.MetadataVersion+5, []int{3, 4, 5}), hb("a", -1, g.MetadataVersion+7, nil)}
			},
			status: protocol.StatusOK, epoch: -1, wantState: protocol.MemberLeaving, persist: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _, now := stable(t, 6, "a", "b")
			var res Result
			for i, req := range tc.reqs(g) {
				now = now.Add(time.Duration(i+1) * 10 * time.Millisecond)
				res = Heartbeat(g, req, now, cfg)
			}
			r := res.Response
			m := g.Members["a"]
			wantEpoch := tc.epoch
			if wantEpoch == 99 {
				wantEpoch = m.Epoch
			}
			if r.Status != tc.status || r.MemberEpoch != wantEpoch {
				t.Fatalf("answered %s epoch %d, want %s %d", r.Status, r.MemberEpoch, tc.status, wantEpoch)
			}
			if m.State != tc.wantState || !equalSets(m.Revoking, tc.wantRevoking) {
				t.Errorf("a is %s revoking %v, want %s %v", m.State, m.Revoking, tc.wantState, tc.wantRevoking)
			}
			if m.State == protocol.MemberLeaving && (len(m.Current)+len(m.Granted) != 0 || g.Target["a"] != nil) {
				t.Errorf("leaving member keeps %v %v %v", m.Current, m.Granted, g.Target["a"])
			}
			if res.Persist != tc.persist {
				t.Errorf("persist %v, want %v", res.Persist, tc.persist)
			}
			if tc.status == protocol.StatusOK && tc.epoch == -1 && len(r.Assignment.AssignedShards)+len(r.Assignment.PendingShards) != 0 {
				t.Errorf("leave answer carries shards: %+v", r)
			}
			if v := CheckInvariants(g); len(v) > 0 {
				t.Errorf("invariants: %v", v)
			}
			checkNoNulls(t, r)
		})
	}
}

// TestLeaveHandsOff: what the leaver drains stays pending for the others
// until it reports it terminal; the rest moves at once.
func TestLeaveHandsOff(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 6, "a", "b")
	a, b := cs[0], cs[1]
	a.sim.startLeave() // drains 0, 1, 2
	now = now.Add(10 * time.Millisecond)
	res := a.beat(now)
	if !slices.Equal(res.Events.Left, []string{"a"}) || g.GroupEpoch != 3 {
		t.Fatalf("leave: %+v epoch %d", res.Events, g.GroupEpoch)
	}
	r := b.beat(now).Response
	if !slices.Equal(assigned(r), []int{3, 4, 5}) || !slices.Equal(pending(r), []int{0, 1, 2}) {
		t.Fatalf("b while a drains: %v %v", assigned(r), pending(r))
	}
	a.beat(now) // DRAINING → REVOKED reported
	if r = b.beat(now).Response; !slices.Equal(assigned(r), []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("b after a drained: %v %v", assigned(r), pending(r))
	}
}
