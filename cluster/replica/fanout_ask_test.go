package replica

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/cluster"
)

// TestFanOutAskSaysWhatCame: a replica's answer other than 200 is an error
// decoded as every Go client of the API decodes one (coordclient): its
// status, error code and message from a §3 body, or the first line of any
// other body, and a Retry-After.
func TestFanOutAskSaysWhatCame(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		retryAfter              string
		want                    string
	}{
		{"error body", "application/json", `{"status":"Service Unavailable","errorCode":"STORE_UNAVAILABLE","message":"the store is read-only"}`,
			http.StatusServiceUnavailable, "2", "answered 503 STORE_UNAVAILABLE: the store is read-only (retry after 2s)"},
		{"a proxy's page", "text/html", "<html>bad gateway</html>\n<body>…</body>", http.StatusBadGateway, "", "answered 502 Bad Gateway: <html>bad gateway</html>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer replica.Close()
			f := newFront("r1", slog.New(slog.NewTextHandler(io.Discard, nil)), assign.Config{}, 0, nil)
			in := httptest.NewRequest(http.MethodGet, "/coord/v1/monitoring/groups", nil)
			_, err := f.ask(context.Background(), in, cluster.Replica{ID: "r2", AdvertiseURL: replica.URL})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ask: %v, want it to say %q", err, tc.want)
			}
		})
	}
}
