package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// TestHeartbeatAnswerHasItsLength: a heartbeat answer is sent whole with
// its Content-Length, a large one (a member owning a thousand shards)
// too, not chunked, and is the JSON of the backend's answer.
func TestHeartbeatAnswerHasItsLength(t *testing.T) {
	t.Parallel()
	f := newFake("orders")
	owned := make([]int, 1000)
	for i := range owned {
		owned[i] = i
	}
	f.heartbeat = func(_ context.Context, _, _, _ string, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse {
		resp := assign.Retry().Answer(req, f.cfg)
		resp.Status, resp.Assignment.AssignedShards = protocol.StatusOK, protocol.Shards(owned)
		return resp
	}
	s := serveFake(t, f, fakeOptions{})
	body := `{"protocolVersion":1,"requestId":"r1","memberId":"m1","memberEpoch":0,"metadataVersion":0,
		"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]}`
	resp, err := http.Post(s.URL+heartbeatPath("orders", "m1"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) > 0 ||
		resp.Header.Get("Content-Length") != strconv.Itoa(len(raw)) || len(raw) < 4096 {
		t.Fatalf("HTTP %d, transfer encoding %v, Content-Length %q for %d bytes", resp.StatusCode,
			resp.TransferEncoding, resp.Header.Get("Content-Length"), len(raw))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	var got protocol.HeartbeatResponse
	if err := json.Unmarshal(raw, &got); err != nil || got.ResponseTo != "r1" || len(got.Assignment.AssignedShards) != 1000 {
		t.Fatalf("answer %.200s (%v)", raw, err)
	}
}
