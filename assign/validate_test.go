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
	t.Parallel()
	long := strings.Repeat("x", protocol.MaxTextLength+1)
	tests := []struct {
		name   string
		edit   func(r *protocol.HeartbeatRequest)
		path   string
		status protocol.Status // "" = accepted
		says   string          // in the message of an INVALID_REQUEST
	}{
		{"valid join", func(r *protocol.HeartbeatRequest) {}, "m-1", "", ""},
		{"valid leave", func(r *protocol.HeartbeatRequest) { r.MemberEpoch = -1 }, "m-1", "", ""},
		{"zero available concurrency", func(r *protocol.HeartbeatRequest) { r.RuntimeConsumerCapacity.AvailableConcurrency = 0 }, "m-1", "", ""},
		{"valid instance id", func(r *protocol.HeartbeatRequest) { r.InstanceID = "0f0e-pod:7.a_b" }, "m-1", "", ""},
		{"longest texts", func(r *protocol.HeartbeatRequest) {
			r.MemberName, r.RequestID = long[1:], long[1:]
			r.ShardProgress = []protocol.ShardProgress{{LastAckedID: long[1:]}}
		}, "m-1", "", ""},
		{"protocol 0", func(r *protocol.HeartbeatRequest) { r.ProtocolVersion = 0 }, "m-1", protocol.StatusUnsupportedProtocol, ""},
		{"protocol 2", func(r *protocol.HeartbeatRequest) { r.ProtocolVersion = 2 }, "m-1", protocol.StatusUnsupportedProtocol, ""},
		// The version is checked first: a v2 body may look malformed to v1.
		{"protocol before body", func(r *protocol.HeartbeatRequest) { r.ProtocolVersion = 2; r.RequestID = "" }, "m-1", protocol.StatusUnsupportedProtocol, ""},
		{"body id differs from path", func(r *protocol.HeartbeatRequest) {}, "m-2", protocol.StatusInvalidRequest, `not the path's "m-2"`},
		{"bad member id", func(r *protocol.HeartbeatRequest) { r.MemberID = "m/1" }, "m/1", protocol.StatusInvalidRequest, "character '/'"},
		{"hash tag member id", func(r *protocol.HeartbeatRequest) { r.MemberID = "m{1}" }, "m{1}", protocol.StatusInvalidRequest, "character '{'"},
		{"blank member id", func(r *protocol.HeartbeatRequest) { r.MemberID = "" }, "", protocol.StatusInvalidRequest, "memberId"},
		{"too long member id", func(r *protocol.HeartbeatRequest) { r.MemberID = strings.Repeat("a", 201) }, strings.Repeat("a", 201), protocol.StatusInvalidRequest, "memberId"},
		{"blank request id", func(r *protocol.HeartbeatRequest) { r.RequestID = "  " }, "m-1", protocol.StatusInvalidRequest, "requestId is blank"},
		{"max concurrency 0", func(r *protocol.HeartbeatRequest) { r.RuntimeConsumerCapacity.RuntimeMaxConcurrency = 0 }, "m-1", protocol.StatusInvalidRequest, "runtimeMaxConcurrency is 0"},
		{"available -1", func(r *protocol.HeartbeatRequest) { r.RuntimeConsumerCapacity.AvailableConcurrency = -1 }, "m-1", protocol.StatusInvalidRequest, "availableConcurrency is -1"},
		{"epoch -2", func(r *protocol.HeartbeatRequest) { r.MemberEpoch = -2 }, "m-1", protocol.StatusInvalidRequest, "memberEpoch is -2"},
		{"instance id with a space", func(r *protocol.HeartbeatRequest) { r.InstanceID = "a b" }, "m-1", protocol.StatusInvalidRequest, "instanceId"},
		{"negative requestSeq", func(r *protocol.HeartbeatRequest) { r.RequestSeq = -1 }, "m-1", protocol.StatusInvalidRequest, "requestSeq is -1"},
		{"too long instance id", func(r *protocol.HeartbeatRequest) { r.InstanceID = strings.Repeat("i", 129) }, "m-1", protocol.StatusInvalidRequest, "at most 128"},
		// Display texts are clipped, not refused (TestValidateClipsDisplayTexts).
		{"too long member name", func(r *protocol.HeartbeatRequest) { r.MemberName = long }, "m-1", "", ""},
		{"too long progress id", func(r *protocol.HeartbeatRequest) {
			r.ShardProgress = []protocol.ShardProgress{{StreamKey: "orders:0"}, {LastDeliveredID: long}}
		}, "m-1", "", ""},
		{"too long request id", func(r *protocol.HeartbeatRequest) { r.RequestID = long }, "m-1", protocol.StatusInvalidRequest, "requestId is 257 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := joinReq("m-1")
			req.MemberEpoch = 7
			tc.edit(req)
			r := Validate(req, tc.path)
			resp, ok := r.Answer(req, Config{}), !r.Refused()
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
			if tc.status == protocol.StatusInvalidRequest &&
				(resp.ErrorCode != protocol.CodeInvalidRequest || !strings.Contains(resp.Message, tc.says) || len(resp.Message) > 400) {
				t.Errorf("errorCode %q, message %q: want INVALID_REQUEST saying %q, short", resp.ErrorCode, resp.Message, tc.says)
			}
		})
	}
}

// TestValidateClipsDisplayTexts: memberName and the shard progress texts
// of an accepted heartbeat are cut to protocol.MaxTextLength bytes at a
// character boundary; shorter ones are kept as sent.
func TestValidateClipsDisplayTexts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		want       int // bytes kept
	}{
		{"short", "orders-consumer", len("orders-consumer")},
		{"exactly the limit", strings.Repeat("x", protocol.MaxTextLength), protocol.MaxTextLength},
		{"one byte over", strings.Repeat("x", protocol.MaxTextLength+1), protocol.MaxTextLength},
		{"two-byte runes across the limit", "x" + strings.Repeat("é", protocol.MaxTextLength), protocol.MaxTextLength - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := joinReq("m-1")
			req.MemberName = tc.text
			req.ShardProgress = []protocol.ShardProgress{{StreamKey: tc.text, LastDeliveredID: tc.text, LastAckedID: tc.text}}
			if r := Validate(req, "m-1"); r.Refused() {
				t.Fatalf("rejected: %s %s", r.Status, r.Message)
			}
			p := req.ShardProgress[0]
			for field, got := range map[string]string{"memberName": req.MemberName, "streamKey": p.StreamKey,
				"lastDeliveredId": p.LastDeliveredID, "lastAckedId": p.LastAckedID} {
				if got != tc.text[:tc.want] {
					t.Errorf("%s kept %d bytes, want the first %d", field, len(got), tc.want)
				}
			}
		})
	}
}

// TestValidateAllocatesNothing: a valid heartbeat, progress on a thousand
// shards included, is checked without allocating (it runs on every one).
func TestValidateAllocatesNothing(t *testing.T) {
	req := joinReq("m-1")
	for i := range 1000 {
		req.ShardProgress = append(req.ShardProgress, protocol.ShardProgress{
			StreamKey: protocol.StreamKey("orders", i), LastDeliveredID: "1700000000000-0", LastAckedID: "1700000000000-0"})
	}
	if n := testing.AllocsPerRun(100, func() { Validate(req, "m-1") }); n != 0 {
		t.Fatalf("Validate allocated %v times per heartbeat", n)
	}
}

func TestValidateNilRequest(t *testing.T) {
	t.Parallel()
	if r := Validate(nil, "m-1"); r.Status != protocol.StatusInvalidRequest {
		t.Fatalf("nil request: %+v", r)
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

// TestRefusalAnswers: every refusal answers with the request's epoch, the
// configured intervals and no null array, and says why when told.
func TestRefusalAnswers(t *testing.T) {
	t.Parallel()
	req := hb("m-1", 5, 9, []int{1})
	cfg := Config{HeartbeatInterval: 1500 * time.Millisecond}
	for _, tc := range []struct {
		resp   protocol.HeartbeatResponse
		status protocol.Status
	}{
		{RetryResponse(req, cfg), protocol.StatusRetry},
		{Retry().Answer(req, cfg), protocol.StatusRetry},
		{Unknown(protocol.CodeGroupNotFound, "gone").Answer(req, cfg), protocol.StatusUnknownMemberID},
		{Invalid("why").Answer(req, cfg), protocol.StatusInvalidRequest},
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
