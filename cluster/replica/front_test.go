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
// request gets the protocol's answer for a state to retry, and the probes
// say live but not ready.
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
					hb.HeartbeatIntervalMs != 2000 || hb.MemberLeaseMs != 6000 || hb.Message == "" {
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
				if err := json.Unmarshal(raw, &eb); err != nil || eb.ErrorCode != protocol.CodeStoreUnavailable || eb.Status != "SERVICE_UNAVAILABLE" ||
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
