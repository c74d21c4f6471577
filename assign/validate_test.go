package assign

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(r *protocol.HeartbeatRequest)
		path   string
		status protocol.Status // "" = accepted
	}{
		{"valid join", func(r *protocol.HeartbeatRequest) {}, "m-1", ""},
		{"valid leave", func(r *protocol.HeartbeatRequest) { r.MemberEpoch = -1 }, "m-1", ""},
		{"zero available concurrency", func(r *protocol.HeartbeatRequest) { r.RuntimeConsumerCapacity.AvailableConcurrency = 0 }, "m-1", ""},
		{"protocol 0", func(r *protocol.HeartbeatRequest) { r.ProtocolVersion = 0 }, "m-1", protocol.StatusUnsupportedProtocol},
		{"protocol 2", func(r *protocol.HeartbeatRequest) { r.ProtocolVersion = 2 }, "m-1", protocol.StatusUnsupportedProtocol},
		// The version is checked first: a v2 body may look malformed to v1.
		{"protocol before body", func(r *protocol.HeartbeatRequest) { r.ProtocolVersion = 2; r.RequestID = "" }, "m-1", protocol.StatusUnsupportedProtocol},
		{"body id differs from path", func(r *protocol.HeartbeatRequest) {}, "m-2", protocol.StatusInvalidRequest},
		{"bad member id", func(r *protocol.HeartbeatRequest) { r.MemberID = "m/1" }, "m/1", protocol.StatusInvalidRequest},
		{"hash tag member id", func(r *protocol.HeartbeatRequest) { r.MemberID = "m{1}" }, "m{1}", protocol.StatusInvalidRequest},
		{"blank member id", func(r *protocol.HeartbeatRequest) { r.MemberID = "" }, "", protocol.StatusInvalidRequest},
		{"too long member id", func(r *protocol.HeartbeatRequest) { r.MemberID = strings.Repeat("a", 201) }, strings.Repeat("a", 201), protocol.StatusInvalidRequest},
		{"blank request id", func(r *protocol.HeartbeatRequest) { r.RequestID = "  " }, "m-1", protocol.StatusInvalidRequest},
		{"max concurrency 0", func(r *protocol.HeartbeatRequest) { r.RuntimeConsumerCapacity.RuntimeMaxConcurrency = 0 }, "m-1", protocol.StatusInvalidRequest},
		{"available -1", func(r *protocol.HeartbeatRequest) { r.RuntimeConsumerCapacity.AvailableConcurrency = -1 }, "m-1", protocol.StatusInvalidRequest},
		{"epoch -2", func(r *protocol.HeartbeatRequest) { r.MemberEpoch = -2 }, "m-1", protocol.StatusInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := joinReq("m-1")
			req.MemberEpoch = 7
			tc.edit(req)
			resp, ok := Validate(req, tc.path, Config{})
			if tc.status == "" {
				if !ok {
					t.Fatalf("rejected with %+v", resp)
				}
				return
			}
			if ok {
				t.Fatalf("accepted, want %s", tc.status)
			}
			checkRejection(t, resp, req, tc.status)
		})
	}
}

func TestValidateNilRequest(t *testing.T) {
	resp, ok := Validate(nil, "m-1", Config{})
	if ok || resp.Status != protocol.StatusInvalidRequest {
		t.Fatalf("nil request: ok=%v %+v", ok, resp)
	}
}

// checkRejection checks the shape of every answer that carries no group:
// echoed epoch, zero epochs and versions, positive intervals, [] arrays.
func checkRejection(t *testing.T, resp protocol.HeartbeatResponse, req *protocol.HeartbeatRequest, status protocol.Status) {
	t.Helper()
	if resp.Status != status {
		t.Errorf("status %s, want %s", resp.Status, status)
	}
	if resp.ResponseTo != req.RequestID || resp.MemberEpoch != req.MemberEpoch {
		t.Errorf("does not echo the request: %+v", resp)
	}
	if resp.GroupEpoch != 0 || resp.AssignmentEpoch != 0 || resp.MetadataVersion != 0 || resp.Assignment.MetadataVersion != 0 {
		t.Errorf("carries group state: %+v", resp)
	}
	if resp.HeartbeatIntervalMs != 3000 || resp.RebalanceTimeoutMs != 60000 {
		t.Errorf("intervals %d/%d, want the defaults 3000/60000", resp.HeartbeatIntervalMs, resp.RebalanceTimeoutMs)
	}
	checkNoNulls(t, resp)
}

// nullable lists the fields docs/protocol.md lets be null: optional objects and
// times, never arrays.
var nullable = regexp.MustCompile(`"(activeMigration|lastHeartbeatAt|memberLeaseExpiresAt|rebalanceDeadlineAt)":null`)

// checkNoNulls fails when a response would marshal a null array.
func checkNoNulls(t *testing.T, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(nullable.ReplaceAllString(string(raw), ""), "null") {
		t.Errorf("marshals a null: %s", raw)
	}
}

func TestRetryAndUnknownResponses(t *testing.T) {
	req := hb("m-1", 5, 9, []int{1})
	cfg := Config{HeartbeatInterval: 1500 * time.Millisecond}
	for _, tc := range []struct {
		resp   protocol.HeartbeatResponse
		status protocol.Status
	}{
		{RetryResponse(req, cfg), protocol.StatusRetry},
		{UnknownMemberResponse(req, cfg), protocol.StatusUnknownMemberID},
		{InvalidRequestResponse(req, cfg), protocol.StatusInvalidRequest},
	} {
		if tc.resp.Status != tc.status || tc.resp.MemberEpoch != 5 || tc.resp.HeartbeatIntervalMs != 1500 {
			t.Errorf("%s: %+v", tc.status, tc.resp)
		}
		checkNoNulls(t, tc.resp)
	}
	// Sub-millisecond intervals still answer a positive interval.
	if r := RetryResponse(req, Config{HeartbeatInterval: time.Microsecond}); r.HeartbeatIntervalMs != 1 {
		t.Errorf("interval %d, want 1", r.HeartbeatIntervalMs)
	}
}
