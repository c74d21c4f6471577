package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestDecodeHeartbeatSortsBodies: one decode tells a body that is not JSON
// (400) from well-formed JSON the protocol refuses (a problem, answered
// INVALID_REQUEST in a 200) from a body that decodes, report times that
// do not parse dropped.
func TestDecodeHeartbeatSortsBodies(t *testing.T) {
	t.Parallel()
	s := &server{heartbeatJSON: heartbeatOptions()}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, body string
		malformed  bool
		problem    string // a part of it
		check      func(t *testing.T, req *protocol.HeartbeatRequest)
	}{
		{name: "not JSON", body: `{"memberId":`, malformed: true},
		{name: "trailing garbage", body: `{"memberId":"m"} x`, malformed: true},
		{name: "empty", body: ``, malformed: true},
		{name: "a type error before a syntax error", body: `{"memberEpoch":"x",}`, malformed: true},
		{name: "a member named twice", body: `{"memberId":"a","memberId":"b"}`, problem: "appears twice"},
		{name: "named twice in a shard", body: `{"ownedShards":[{"shardIndex":1,"shardIndex":2}]}`, problem: "appears twice"},
		{name: "a field of the wrong type", body: `{"requestId":"r","memberEpoch":"x"}`, problem: `field "memberEpoch"`,
			check: func(t *testing.T, req *protocol.HeartbeatRequest) {
				if req.RequestID != "r" {
					t.Errorf("requestId %q: what decoded is echoed", req.RequestID)
				}
			}},
		{name: "not an object", body: `[]`, problem: "must be a JSON object"},
		{name: "report times", body: `{"shardProgress":[{"updatedAt":"2026-01-01T00:00:00"},{"updatedAt":"2026-01-01T00:00:00Z"},{"updatedAt":5}],
			"revokingShards":[{"ackedAt":12},{"ackedAt":null},{"ackedAt":"2026-01-01T00:00:00Z"},{"ackedAt":{"x":1}}]}`,
			check: func(t *testing.T, req *protocol.HeartbeatRequest) {
				p, r := req.ShardProgress, req.RevokingShards
				if len(p) != 3 || !p[0].UpdatedAt.IsZero() || !p[1].UpdatedAt.Equal(at) || !p[2].UpdatedAt.IsZero() {
					t.Errorf("updatedAt: %+v", p)
				}
				if len(r) != 4 || r[0].AckedAt != nil || r[1].AckedAt != nil || r[2].AckedAt == nil || !r[2].AckedAt.Equal(at) || r[3].AckedAt != nil {
					t.Errorf("ackedAt: %+v", r)
				}
			}},
		{name: "case matters", body: `{"MemberId":"m","memberId":"n"}`,
			check: func(t *testing.T, req *protocol.HeartbeatRequest) {
				if req.MemberID != "n" {
					t.Errorf("memberId %q", req.MemberID)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var req protocol.HeartbeatRequest
			problem, perr := s.decodeHeartbeat([]byte(tc.body), &req)
			switch {
			case tc.malformed:
				if perr == nil || perr.Code != protocol.CodeInvalidRequest {
					t.Fatalf("perr %v, problem %q: want a 400", perr, problem)
				}
			case perr != nil:
				t.Fatalf("perr %v", perr)
			case tc.problem == "" && problem != "":
				t.Fatalf("problem %q", problem)
			case !strings.Contains(problem, tc.problem):
				t.Fatalf("problem %q, want one saying %q", problem, tc.problem)
			}
			if tc.check != nil {
				tc.check(t, &req)
			}
		})
	}
}
