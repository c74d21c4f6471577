package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// post sends raw as a JSON body and returns the status and answer.
func post(t *testing.T, method, url string, raw []byte) (int, []byte) {
	req, err := http.NewRequest(method, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// FuzzHeartbeatBody: whatever a member sends, the heartbeat answers 200 with
// a status and positive intervals, or 400/413 with an error body for a body
// that is not JSON — never a 5xx, never a null array.
func FuzzHeartbeatBody(f *testing.F) {
	for _, seed := range []string{
		`{"protocolVersion":1,"requestId":"r","memberId":"m1","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]}`,
		`{"protocolVersion":1,"requestId":"r","memberId":"m1","memberEpoch":7,"ownedShards":[{"shardIndex":3}],"revokingShards":[{"shard":{"shardIndex":2},"state":"REVOKED","inFlight":0}]}`,
		`{"protocolVersion":1,"requestId":"r","memberId":"m1","memberEpoch":-1}`,
		`{"protocolVersion":2}`,
		`{"memberEpoch":"x"}`,
		`{"ownedShards":[{"shardIndex":-5},{"shardIndex":99999999999}]}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	s := coordtest.Start(f, "", coordtest.Options{AutoCreateGroups: true})
	s.CreateStream("orders", 4)
	url := s.URL + base + "/streams/orders/groups/orders/members/m1/heartbeat"
	f.Fuzz(func(t *testing.T, raw []byte) {
		status, body := post(t, http.MethodPost, url, raw)
		if json.Valid(raw) && len(raw) <= 1<<20 && status != http.StatusOK {
			// Any well-formed JSON gets its answer in a 200: a non-2xx
			// would stop the reference clients' member threads.
			t.Fatalf("status %d for well-formed JSON %q: %s", status, raw, body)
		}
		switch status {
		case http.StatusOK:
			var resp protocol.HeartbeatResponse
			if err := json.Unmarshal(body, &resp); err != nil || resp.Status == "" ||
				resp.HeartbeatIntervalMs <= 0 || resp.RebalanceTimeoutMs <= 0 ||
				resp.Assignment.AssignedShards == nil || resp.Assignment.PendingShards == nil {
				t.Fatalf("200 with a bad answer %s for %q", body, raw)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var e protocol.ErrorBody
			if err := json.Unmarshal(body, &e); err != nil || e.ErrorCode == "" {
				t.Fatalf("%d without an error body: %s", status, body)
			}
		default:
			t.Fatalf("status %d for %q: %s", status, raw, body)
		}
	})
}

// FuzzAdminBodies: admin bodies of any shape get a 2xx or a 4xx with an
// error body, never a 5xx.
func FuzzAdminBodies(f *testing.F) {
	for _, seed := range []string{
		`{"initialShardCount":4,"requestedBy":"ops"}`,
		`{"targetShardCount":2,"requestedBy":"ops","reason":"r"}`,
		`{"targetShardCount":-1,"requestedBy":"ops"}`,
		`{"requestedBy":"ops","reason":"r","force":true}`,
		`{"initialShardCount":1e99}`, `{"deprecatedAfter":"yesterday"}`, `{}`, `[1,2]`, `nul`,
	} {
		f.Add([]byte(seed), uint8(0))
	}
	s := coordtest.Start(f, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	targets := []struct{ method, path string }{
		{http.MethodPost, "/streams/fuzz"},
		{http.MethodPost, "/streams/orders/groups/g1"},
		{http.MethodPost, "/streams/orders/scale"},
		{http.MethodDelete, "/streams/orders/groups/g1"},
		{http.MethodPost, "/streams/orders/migrations/rs-1/complete"},
		{http.MethodPost, "/streams/orders/groups/orders/migrations/rs-1/rollback"},
	}
	f.Fuzz(func(t *testing.T, raw []byte, which uint8) {
		tg := targets[int(which)%len(targets)]
		status, body := post(t, tg.method, s.URL+base+tg.path, raw)
		if status >= 500 {
			t.Fatalf("%s %s with %q: %d %s", tg.method, tg.path, raw, status, body)
		}
		if status >= 400 {
			var e protocol.ErrorBody
			if err := json.Unmarshal(body, &e); err != nil || e.ErrorCode == "" {
				t.Fatalf("%d without an error body: %s", status, body)
			}
		}
	})
}
