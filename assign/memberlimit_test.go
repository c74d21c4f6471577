package assign

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestMemberLimit: a join past Config.MaxMembers is answered RETRY with
// MEMBER_LIMIT_REACHED and changes nothing, unless a terminal member can
// make room; members already in the group are never refused by the cap.
func TestMemberLimit(t *testing.T) {
	t.Parallel()
	const limit = 3
	tests := []struct {
		name string
		// setup runs on a group of members m0..m2 that joined at t0; it
		// returns the time of the checked heartbeat.
		setup      func(g *Group, cfg Config) time.Time
		req        func(g *Group) *protocol.HeartbeatRequest
		wantStatus protocol.Status
		wantCode   protocol.ErrorCode
		// wantMembers are the group's member ids after the heartbeat.
		wantMembers []string
		wantPersist bool
	}{
		{
			name:        "a new member past the cap waits",
			setup:       func(*Group, Config) time.Time { return t0.Add(time.Second) },
			req:         func(*Group) *protocol.HeartbeatRequest { return joinReq("new") },
			wantStatus:  protocol.StatusRetry,
			wantCode:    protocol.CodeMemberLimitReached,
			wantMembers: []string{"m0", "m1", "m2"},
		},
		{
			name:  "a member of the group heartbeats as usual",
			setup: func(*Group, Config) time.Time { return t0.Add(time.Second) },
			req: func(g *Group) *protocol.HeartbeatRequest {
				return hb("m1", g.Members["m1"].Epoch, g.MetadataVersion, nil)
			},
			wantStatus:  protocol.StatusOK,
			wantMembers: []string{"m0", "m1", "m2"},
			wantPersist: true, // its first report
		},
		{
			name:        "a member of the group joins again",
			setup:       func(*Group, Config) time.Time { return t0.Add(time.Second) },
			req:         func(*Group) *protocol.HeartbeatRequest { return joinReq("m2") },
			wantStatus:  protocol.StatusOK,
			wantMembers: []string{"m0", "m1", "m2"},
		},
		{
			name: "a leaver that holds nothing makes room",
			setup: func(g *Group, cfg Config) time.Time {
				Heartbeat(g, leaveReq(g, "m1"), t0.Add(time.Second), cfg)
				return t0.Add(2 * time.Second)
			},
			req:         func(*Group) *protocol.HeartbeatRequest { return joinReq("new") },
			wantStatus:  protocol.StatusOK,
			wantMembers: []string{"m0", "m2", "new"},
			wantPersist: true,
		},
		{
			name: "the member that ended first makes room",
			setup: func(g *Group, cfg Config) time.Time {
				Heartbeat(g, leaveReq(g, "m2"), t0.Add(time.Second), cfg)
				Heartbeat(g, leaveReq(g, "m0"), t0.Add(2*time.Second), cfg)
				return t0.Add(3 * time.Second)
			},
			req:         func(*Group) *protocol.HeartbeatRequest { return joinReq("new") },
			wantStatus:  protocol.StatusOK,
			wantMembers: []string{"m0", "m1", "new"},
			wantPersist: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxMembers = limit
			g := NewGroup("orders", "billing", 6, t0)
			for i := range limit {
				if r := Heartbeat(g, joinReq(fmt.Sprintf("m%d", i)), t0, cfg); r.Response.Status != protocol.StatusOK {
					t.Fatalf("join m%d: %s", i, r.Response.Status)
				}
			}
			now := tc.setup(g, cfg)
			before := dumpGroup(g)
			r := Heartbeat(g, tc.req(g), now, cfg)
			if r.Response.Status != tc.wantStatus || r.Response.ErrorCode != tc.wantCode {
				t.Fatalf("answer %s %q, want %s %q", r.Response.Status, r.Response.ErrorCode, tc.wantStatus, tc.wantCode)
			}
			ids := sortedIDs(g.Members)
			if !slices.Equal(ids, tc.wantMembers) {
				t.Errorf("members %v, want %v", ids, tc.wantMembers)
			}
			if r.Persist != tc.wantPersist {
				t.Errorf("persist %v, want %v", r.Persist, tc.wantPersist)
			}
			if tc.wantCode == protocol.CodeMemberLimitReached {
				if after := dumpGroup(g); after != before {
					t.Errorf("a refused join changed the group:\nbefore %s\nafter  %s", before, after)
				}
				if !r.Events.MemberLimitReached || r.Response.Message == "" || r.Response.HeartbeatIntervalMs <= 0 ||
					r.Response.MemberEpoch != 0 || len(r.Response.Assignment.AssignedShards) != 0 {
					t.Errorf("refused join answered %+v, events %+v", r.Response, r.Events)
				}
			}
			if problems := CheckInvariants(g); len(problems) > 0 {
				t.Fatal(problems)
			}
		})
	}
}
