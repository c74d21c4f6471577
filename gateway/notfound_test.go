package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestEvery404IsAnErrorBody walks every route family (the API, its
// monitoring and Grafana branches, auth, metrics, OpenAPI, profiles,
// probes, the console) with a path the server does not serve, or names
// that do not exist, as the admin: each answers 404 with a §3 error body
// in JSON and the most specific code the server can tell.
func TestEvery404IsAnErrorBody(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	s.CreateStream("orders", 2)
	admin := s.Authorization
	const (
		b  = protocol.BasePath
		og = b + "/monitoring/streams/orders/groups/orders"
	)
	for _, tc := range []struct {
		method, path string
		want         protocol.ErrorCode
	}{
		{"GET", "/", protocol.CodeNotFound},
		{"GET", "/nothing/here", protocol.CodeNotFound},
		{"GET", b, protocol.CodeNotFound},
		{"GET", b + "/nope", protocol.CodeNotFound},
		{"POST", b + "/auth/nope", protocol.CodeNotFound},
		{"GET", b + "/streams/orders/nope", protocol.CodeNotFound},
		{"GET", b + "/streams/orders/groups/orders/nope", protocol.CodeNotFound},
		{"GET", b + "/streams/nope/groups/orders", protocol.CodeStreamNotFound},
		{"GET", b + "/streams/orders/groups/nope", protocol.CodeGroupNotFound},
		{"GET", b + "/streams/orders/groups/orders/migrations/rs-9", protocol.CodeMigrationNotFound},
		{"POST", b + "/streams/orders/groups/orders/members/m/nope", protocol.CodeNotFound},
		{"GET", b + "/monitoring/nope", protocol.CodeNotFound},
		{"GET", og + "/nope", protocol.CodeNotFound},
		{"GET", b + "/monitoring/streams/nope/groups/orders/members", protocol.CodeStreamNotFound},
		{"GET", b + "/monitoring/streams/orders/groups/nope/assignments", protocol.CodeGroupNotFound},
		{"GET", og + "/shards/0/nope", protocol.CodeNotFound},
		{"GET", b + "/monitoring/grafana/nope", protocol.CodeNotFound},
		{"GET", b + "/monitoring/grafana/options/nope", protocol.CodeNotFound},
		{"GET", b + "/monitoring/cluster", protocol.CodeNotFound}, // alone, not in a cluster
		{"GET", "/metrics/nope", protocol.CodeNotFound},
		{"GET", "/actuator/nope", protocol.CodeNotFound},
		{"GET", "/openapi.yaml/nope", protocol.CodeNotFound},
		{"GET", "/healthz/nope", protocol.CodeNotFound},
		{"GET", "/readyz/nope", protocol.CodeNotFound},
		{"GET", "/debug/nope", protocol.CodeNotFound},
		{"GET", "/debug/pprof/no-such-profile", protocol.CodeNotFound},
		{"GET", "/debug/pprof/no-such-profile?debug=1", protocol.CodeNotFound},
		{"GET", "/debug/pprof/heap/nope", protocol.CodeNotFound},
		{"GET", "/console/nope", protocol.CodeNotFound},
	} {
		what := tc.method + " " + tc.path
		status, hdr, raw := send(t, s.URL, tc.method, tc.path, "", admin)
		if status != http.StatusNotFound || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("%s: HTTP %d %q, want 404 with a JSON error body: %.200s", what, status, hdr.Get("Content-Type"), raw)
			continue
		}
		errorBody(t, what, raw, tc.want)
	}
}

// TestNoRedirects checks that a path with an extra trailing slash, or a
// case or cleanup gin could "fix", is not redirected (a 301 or 307 with an
// HTML body) but answered 404 or 405 with the JSON error body of §3, by a
// client that does not follow redirects.
func TestNoRedirects(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	s.CreateStream("abc", 2)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	const b = protocol.BasePath
	for _, tc := range []struct {
		method, path string
		wantStatus   int
		wantCode     protocol.ErrorCode
	}{
		{"GET", b + "/monitoring/groups/", http.StatusNotFound, protocol.CodeNotFound},
		{"POST", b + "/streams/abc/", http.StatusNotFound, protocol.CodeNotFound},
		{"GET", b + "/streams/abc/groups/abc/", http.StatusNotFound, protocol.CodeNotFound},
		{"POST", b + "/streams/abc/groups/abc/members/m/heartbeat/", http.StatusNotFound, protocol.CodeNotFound},
		{"GET", "/healthz/", http.StatusNotFound, protocol.CodeNotFound},
		{"GET", "/HEALTHZ", http.StatusNotFound, protocol.CodeNotFound},
		{"GET", b + "/Monitoring/Groups", http.StatusNotFound, protocol.CodeNotFound},
		{"GET", "/debug/pprof", http.StatusNotFound, protocol.CodeNotFound},
		{"DELETE", "/openapi.yaml/", http.StatusNotFound, protocol.CodeNotFound},
	} {
		what := tc.method + " " + tc.path
		req, err := http.NewRequest(tc.method, s.URL+tc.path, strings.NewReader(`{"requestedBy":"ops"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", s.Authorization)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.wantStatus || resp.Header.Get("Location") != "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: HTTP %d %q Location %q, want %d with a JSON error body: %.200s", what, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("Location"), tc.wantStatus, raw)
			continue
		}
		errorBody(t, what, raw, tc.wantCode)
	}
}

// errorBody decodes a §3 error body, failing the test when raw is not one
// with code want.
func errorBody(t *testing.T, what string, raw []byte, want protocol.ErrorCode) {
	t.Helper()
	var e protocol.ErrorBody
	if err := json.Unmarshal(raw, &e); err != nil || e.ErrorCode != want || e.Status == "" || e.Message == "" {
		t.Errorf("%s: want a %s error body, got %s", what, want, raw)
	}
}

// Every 404 under /console is a §3 error body; the page itself is served.
func TestConsoleUnknownFileIs404(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{})
	for _, p := range []string{"/console/nope", "/console/nope.js", "/console/static/app.js", "/console/..%2fgo.mod", "/console/app.js/x"} {
		status, hdr, raw := send(t, s.URL, http.MethodGet, p, "", "")
		if status != http.StatusNotFound || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("%s: HTTP %d %q: %s", p, status, hdr.Get("Content-Type"), raw)
		}
		errorBody(t, p, raw, protocol.CodeNotFound)
	}
	for _, p := range []string{"/console", "/console/", "/console/app.js", "/console/style.css"} {
		if status, _, raw := send(t, s.URL, http.MethodGet, p, "", ""); status != http.StatusOK {
			t.Errorf("%s: HTTP %d: %.200s", p, status, raw)
		}
	}
}
