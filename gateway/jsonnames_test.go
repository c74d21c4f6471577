package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// Member names match exactly, case included, and a name given twice is
// refused: no second spelling or copy of a field smuggles a value.
func TestJSONKeysMatchExactly(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake("orders"), fakeOptions{Auth: true})
	admin := s.Authorization

	for name, tc := range map[string]struct {
		path, body string
		want       int
	}{
		"case-folded required field":   {"/streams/orders/scale", `{"TargetShardCount":2,"requestedBy":"ops"}`, http.StatusBadRequest},
		"duplicate field":              {"/streams/orders/scale", `{"targetShardCount":2,"targetShardCount":3,"requestedBy":"ops"}`, http.StatusBadRequest},
		"duplicate requestedBy":        {"/streams/orders/groups/g2", `{"requestedBy":"ops","requestedBy":"   "}`, http.StatusBadRequest},
		"duplicate nested":             {"/streams/orders/groups/g3", `{"requestedBy":"ops","x":{"a":1,"a":2}}`, http.StatusBadRequest},
		"case-folded extra is unknown": {"/streams/orders/groups/g4", `{"requestedBy":"ops","RequestedBy":"   "}`, http.StatusCreated},
	} {
		status, _, raw := send(t, s.URL, http.MethodPost, base+tc.path, tc.body, admin)
		if status != tc.want {
			t.Errorf("%s: HTTP %d %s, want %d", name, status, raw, tc.want)
		}
		if tc.want == http.StatusBadRequest {
			errorBody(t, name, raw, protocol.CodeInvalidRequest)
		}
	}
	// The audit log kept what the handler read, not a case-folded copy.
	var page protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?limit=50", nil, http.StatusOK, &page)
	for _, e := range page.Entries {
		if e.ConsumerGroup == "g4" && e.RequestedBy != "ops" {
			t.Errorf("audit of g4: requestedBy %q, want ops", e.RequestedBy)
		}
	}

	if status, _, raw := send(t, s.URL, http.MethodPost, base+"/auth/login",
		`{"Username":"root","Password":"root-pw"}`, ""); status != http.StatusBadRequest {
		t.Errorf("login with case-folded names: HTTP %d %s", status, raw)
	}
	if status, _, raw := send(t, s.URL, http.MethodPost, base+"/auth/login",
		`{"username":"reader","password":"reader-pw","username":"root"}`, ""); status != http.StatusBadRequest {
		t.Errorf("login with a duplicate username: HTTP %d %s", status, raw)
	}

	member := coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember))
	hb := base + "/streams/orders/groups/orders/members/m1/heartbeat"
	const rest = `"protocolVersion":1,"requestId":"r","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]`
	for name, tc := range map[string]struct {
		body string
		want protocol.Status
		// why: the answer says what is wrong (errorCode, message).
		why bool
	}{
		"exact names": {`{"memberId":"m1",` + rest + `}`, protocol.StatusOK, false},
		// No memberId at all, as far as the server reads.
		"case-folded memberId": {`{"MemberId":"m1",` + rest + `}`, protocol.StatusInvalidRequest, false},
		"duplicate memberId":   {`{"memberId":"m1","memberId":"m2",` + rest + `}`, protocol.StatusInvalidRequest, true},
		"duplicate in a shard": {`{"memberId":"m1",` + rest + `,"revokingShards":[{"shard":{"shardIndex":1,"shardIndex":2},"state":"REVOKED","inFlight":0}]}`, protocol.StatusInvalidRequest, true},
	} {
		// A heartbeat answers well-formed JSON in a 200, whatever it holds.
		status, _, raw := send(t, s.URL, http.MethodPost, hb, tc.body, member)
		var resp protocol.HeartbeatResponse
		if status != http.StatusOK || json.Unmarshal(raw, &resp) != nil || resp.Status != tc.want {
			t.Errorf("%s: HTTP %d %s, want status %s", name, status, raw, tc.want)
			continue
		}
		if tc.why && (resp.ErrorCode != protocol.CodeInvalidRequest || resp.Message == "") {
			t.Errorf("%s: INVALID_REQUEST without saying why: %s", name, raw)
		}
	}
}
