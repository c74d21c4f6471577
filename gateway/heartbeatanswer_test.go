package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// TestHeartbeatAnswerHasItsLength: a heartbeat answer is sent whole with
// its Content-Length, small or large (a member owning a thousand shards),
// on either side of the size net/http buffers before it would chunk, never
// chunked, and is the JSON of the backend's answer.
func TestHeartbeatAnswerHasItsLength(t *testing.T) {
	t.Parallel()
	f := newFake("orders")
	var owned atomic.Int64
	f.heartbeat = func(_ context.Context, _, _, _ string, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse {
		resp := assign.Retry().Answer(req, f.cfg)
		shards := make([]int, owned.Load())
		for i := range shards {
			shards[i] = i
		}
		resp.Status, resp.Assignment.AssignedShards = protocol.StatusOK, protocol.Shards(shards)
		return resp
	}
	s := serveFake(t, f, fakeOptions{})
	body := `{"protocolVersion":1,"requestId":"r1","memberId":"m1","memberEpoch":0,"metadataVersion":0,
		"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]}`
	var small, large bool
	for _, n := range append([]int{0, 1, 1000}, seq(80, 130)...) {
		owned.Store(int64(n))
		raw := postHeartbeatAnswer(t, s.URL, body)
		small, large = small || len(raw) <= 2048, large || len(raw) > 2048
		var got protocol.HeartbeatResponse
		if err := json.Unmarshal(raw, &got); err != nil || got.ResponseTo != "r1" || len(got.Assignment.AssignedShards) != n {
			t.Fatalf("%d shards: answer %.200s (%v)", n, raw, err)
		}
	}
	if !small || !large {
		t.Fatalf("the answers did not straddle 2048 bytes: small %v, large %v", small, large)
	}
}

// seq is from, from+1, …, to.
func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// postHeartbeatAnswer posts body as a heartbeat of m1 and returns the 200
// answer's body, failing unless it came whole with its Content-Length and
// a JSON Content-Type.
func postHeartbeatAnswer(t *testing.T, url, body string) []byte {
	t.Helper()
	resp, err := http.Post(url+heartbeatPath("orders", "m1"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) > 0 ||
		resp.Header.Get("Content-Length") != strconv.Itoa(len(raw)) {
		t.Fatalf("HTTP %d, transfer encoding %v, Content-Length %q for %d bytes", resp.StatusCode,
			resp.TransferEncoding, resp.Header.Get("Content-Length"), len(raw))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	return raw
}
