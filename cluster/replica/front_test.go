package replica

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// A replica between two joins (no cluster node) can serve nothing: each
// request gets the protocol's answer for a state to retry, with
// REPLICA_JOINING, and the probes say live but not ready.
func TestFrontWithoutOwner(t *testing.T) {
	f := newFront("r9", slog.New(slog.NewTextHandler(io.Discard, nil)),
		assign.Config{HeartbeatInterval: 2 * time.Second, MemberLease: 6 * time.Second, RebalanceTimeout: 20 * time.Second}, time.Second, nil)
	hbPath := protocol.BasePath + "/streams/orders/groups/orders/members/pod-a%3Am0/heartbeat"
	tests := []struct {
		name, method, path, body string
		status                   int
		check                    func(t *testing.T, raw []byte, h http.Header)
	}{
		{"heartbeat", http.MethodPost, hbPath, `{"protocolVersion":1,"requestId":"hb-7","memberId":"pod-a:m0","memberEpoch":4}`, http.StatusOK,
			func(t *testing.T, raw []byte, _ http.Header) {
				var hb protocol.HeartbeatResponse
				if err := json.Unmarshal(raw, &hb); err != nil {
					t.Fatal(err)
				}
				if hb.Status != protocol.StatusRetry || hb.ResponseTo != "hb-7" || hb.MemberID != "pod-a:m0" || hb.MemberEpoch != 4 ||
					hb.HeartbeatIntervalMs != 2000 || hb.MemberLeaseMs != 6000 || hb.Message == "" || hb.ErrorCode != protocol.CodeReplicaJoining {
					t.Fatalf("answer %s", raw)
				}
			}},
		{"heartbeat that is not JSON", http.MethodPost, hbPath, `not json`, http.StatusOK,
			func(t *testing.T, raw []byte, _ http.Header) {
				var hb protocol.HeartbeatResponse
				if err := json.Unmarshal(raw, &hb); err != nil || hb.Status != protocol.StatusRetry || hb.MemberID != "pod-a:m0" || hb.HeartbeatIntervalMs <= 0 {
					t.Fatalf("answer %s (%v)", raw, err)
				}
			}},
		{"admin call", http.MethodPost, protocol.BasePath + "/streams/orders", `{"requestedBy":"x"}`, http.StatusServiceUnavailable,
			func(t *testing.T, raw []byte, h http.Header) {
				var eb protocol.ErrorBody
				if err := json.Unmarshal(raw, &eb); err != nil || eb.ErrorCode != protocol.CodeReplicaJoining || eb.Status != "SERVICE_UNAVAILABLE" ||
					h.Get("Retry-After") != "1" || h.Get(ForwardedByHeader) != "r9" {
					t.Fatalf("answer %s %v (%v)", raw, h, err)
				}
			}},
		{"read", http.MethodGet, protocol.BasePath + "/monitoring/cluster", "", http.StatusServiceUnavailable, nil},
		{"liveness", http.MethodGet, "/healthz", "", http.StatusOK, nil},
		{"readiness", http.MethodGet, "/readyz", "", http.StatusServiceUnavailable,
			func(t *testing.T, raw []byte, _ http.Header) {
				if strings.TrimSpace(string(raw)) != `{"status":"NOT_READY"}` {
					t.Fatalf("answer %s", raw)
				}
			}},
	}
	f.advertise = "http://127.0.0.1:9"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			f.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if w.Code != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.status)
			}
			if h := w.Header().Get(protocol.OwnerURLHeader); h != "" {
				t.Fatalf("an answer of a replica that runs nothing names an owner: %s", h)
			}
			if tc.check != nil {
				tc.check(t, w.Body.Bytes(), w.Header())
			}
		})
	}
}

// An owner that takes the request but does not answer (a frozen process:
// its kernel still accepts connections) holds a forwarded heartbeat no
// longer than what it asks to be held and the forwarding bound, min(1 s,
// member lease / 6): the member is answered RETRY with REPLICA_NOT_OWNER
// and moves on, well inside its lease.
func TestForwardedHeartbeatToAFrozenOwnerIsBounded(t *testing.T) {
	release := make(chan struct{})
	frozen := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer frozen.Close()
	defer close(release)
	f := newFront("r1", slog.New(slog.DiscardHandler),
		assign.Config{HeartbeatInterval: 2 * time.Second, MemberLease: 3 * time.Second, RebalanceTimeout: 20 * time.Second}, 10*time.Second, nil)
	hbPath := protocol.BasePath + "/streams/orders/groups/orders/members/m0/heartbeat"
	for _, tc := range []struct {
		body string
		want time.Duration // the bound: waitMs (at most the interval) + lease/6
	}{
		{`{"protocolVersion":1,"requestId":"hb-1","memberId":"m0","memberEpoch":2}`, 500 * time.Millisecond},
		{`{"protocolVersion":1,"requestId":"hb-2","memberId":"m0","memberEpoch":2,"waitMs":300}`, 800 * time.Millisecond},
	} {
		w := httptest.NewRecorder()
		start := time.Now()
		f.forward(w, httptest.NewRequest(http.MethodPost, hbPath, strings.NewReader(tc.body)), frozen.URL)
		took := time.Since(start)
		var hb protocol.HeartbeatResponse
		if err := json.Unmarshal(w.Body.Bytes(), &hb); err != nil || w.Code != http.StatusOK || hb.Status != protocol.StatusRetry ||
			hb.ErrorCode != protocol.CodeReplicaNotOwner || hb.ResponseTo == "" {
			t.Fatalf("%s: %d %s (%v)", tc.body, w.Code, w.Body, err)
		}
		if took < tc.want || took > tc.want+time.Second {
			t.Errorf("%s: answered after %v, want the bound %v", tc.body, took, tc.want)
		}
	}
}
