package gateway_test

import (
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	runtimepprof "runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// TestPprofAdminOnly checks /debug/pprof: 401 without credentials, 403 for
// every role but ADMIN, and the real profiles for ADMIN.
func TestPprofAdminOnly(t *testing.T) {
	t.Parallel()
	profiling(t)
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	cred := func(user string) string { return coordtest.Basic(user, coordtest.Password(user)) }
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"none", "", http.StatusUnauthorized},
		{"wrong password", coordtest.Basic(coordtest.UserAdmin, "nope"), http.StatusUnauthorized},
		{"reader", cred(coordtest.UserReader), http.StatusForbidden},
		{"monitor", cred(coordtest.UserMonitor), http.StatusForbidden},
		{"writer", cred(coordtest.UserWriter), http.StatusForbidden},
		{"member", cred(coordtest.UserMember), http.StatusForbidden},
		{"admin", cred(coordtest.UserAdmin), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
				status, _, raw := send(t, s.URL, http.MethodGet, path, "", tc.authorization)
				if status != tc.want {
					t.Fatalf("GET %s as %s: %d, want %d: %.200s", path, tc.name, status, tc.want, raw)
				}
				if status != http.StatusOK && strings.Contains(string(raw), "goroutine") {
					t.Fatalf("GET %s as %s leaked a profile: %.200s", path, tc.name, raw)
				}
			}
		})
	}
	admin := cred(coordtest.UserAdmin)
	for _, tc := range []struct {
		path, want string
		status     int
	}{
		{"/debug/pprof/", "goroutine", http.StatusOK},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile: total", http.StatusOK},
		{"/debug/pprof/heap?debug=1", "heap profile:", http.StatusOK},
		{"/debug/pprof/symbol", "num_symbols", http.StatusOK},
		{"/debug/pprof/profile?seconds=1", "", http.StatusOK},
		{"/debug/pprof/no-such-profile", `"errorCode":"NOT_FOUND"`, http.StatusNotFound},
	} {
		status, _, raw := send(t, s.URL, http.MethodGet, tc.path, "", admin)
		if status != tc.status || !strings.Contains(string(raw), tc.want) || len(raw) == 0 {
			t.Errorf("GET %s as admin: %d %.200q, want %d containing %q", tc.path, status, raw, tc.status, tc.want)
		}
	}
}

// startLimitedServer serves the gateway of s behind a real HTTP server
// with writeTimeout, as rscoord serve does (coordtest's test server has
// no write timeout).
func startLimitedServer(t *testing.T, s *coordtest.Server, writeTimeout time.Duration) string {
	t.Helper()
	h := gateway.New(newFake(), gateway.Options{Auth: s.Auth, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := gateway.NewHTTPServer(h, gateway.HTTPLimits{WriteTimeout: writeTimeout}, nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestPprofSeconds checks ?seconds of the CPU profile, the trace and the
// delta profiles on a server whose write timeout is 3 s: a value that is
// not a positive number, or not below the write timeout (the default 30 s
// of the CPU profile included), answers 400 INVALID_REQUEST with an error
// body, not net/http/pprof's plain text.
func TestPprofSeconds(t *testing.T) {
	t.Parallel()
	profiling(t)
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	url := startLimitedServer(t, s, 3*time.Second)
	admin := coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	for _, tc := range []struct {
		path, wantMessage string
		want              int
	}{
		{"/debug/pprof/profile", "write timeout 3s", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=3", "write timeout 3s", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=99999999999999", "write timeout 3s", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=0", "positive whole number", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=-1", "positive whole number", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=1.5", "positive whole number", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=ten", "positive whole number", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=1", "", http.StatusOK},
		{"/debug/pprof/trace?seconds=NaN", "positive number", http.StatusBadRequest},
		{"/debug/pprof/trace?seconds=Inf", "positive number", http.StatusBadRequest},
		{"/debug/pprof/trace?seconds=3.5", "write timeout 3s", http.StatusBadRequest},
		{"/debug/pprof/trace?seconds=0.2", "", http.StatusOK},
		{"/debug/pprof/trace", "", http.StatusOK},
		{"/debug/pprof/heap?seconds=3", "write timeout 3s", http.StatusBadRequest},
		{"/debug/pprof/heap?seconds=x", "positive whole number", http.StatusBadRequest},
		{"/debug/pprof/heap?seconds=1", "", http.StatusOK},
		{"/debug/pprof/heap?seconds=1&debug=1", "debug", http.StatusBadRequest},
		{"/debug/pprof/goroutine?seconds=1&debug=2", "debug", http.StatusBadRequest},
		{"/debug/pprof/heap?seconds=1&debug=0", "", http.StatusOK},
		{"/debug/pprof/" + customProfile(t) + "?seconds=1", "delta", http.StatusBadRequest},
		{"/debug/pprof/" + customProfile(t) + "?debug=1", "", http.StatusOK},
	} {
		status, hdr, raw := send(t, url, http.MethodGet, tc.path, "", admin)
		if status != tc.want {
			t.Errorf("GET %s: %d %.200q, want %d", tc.path, status, raw, tc.want)
			continue
		}
		if status != http.StatusOK {
			if !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || !strings.Contains(string(raw), tc.wantMessage) {
				t.Errorf("GET %s: %q %s, want a JSON error body saying %q", tc.path, hdr.Get("Content-Type"), raw, tc.wantMessage)
			}
			errorBody(t, "GET "+tc.path, raw, protocol.CodeInvalidRequest)
		}
	}
}

// customProfile is a profile of this process beside the runtime's (as a
// library may add one), registered once per process.
func customProfile(t *testing.T) string {
	t.Helper()
	const name = "rscoord.test.custom"
	if runtimepprof.Lookup(name) == nil {
		runtimepprof.NewProfile(name)
	}
	return name
}

// TestPprofOneCPUProfileAtATime sends two CPU profile requests at once:
// the runtime takes one CPU profile per process, so one gets the profile
// and the other 429 RATE_LIMIT_EXCEEDED with Retry-After (the time the
// first has left) and an error body, not net/http/pprof's plain-text 500.
// The same holds for the execution trace. Once the first ends, the next
// is served.
func TestPprofOneCPUProfileAtATime(t *testing.T) {
	t.Parallel()
	profiling(t)
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	url := startLimitedServer(t, s, 10*time.Second)
	admin := coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	for _, path := range []string{"/debug/pprof/profile?seconds=2", "/debug/pprof/trace?seconds=2"} {
		t.Run(path, func(t *testing.T) {
			type answer struct {
				status int
				hdr    http.Header
				raw    []byte
				err    error
			}
			answers := make(chan answer, 2)
			for range 2 {
				go func() { // no t.Fatal off the test's goroutine
					req, err := http.NewRequest(http.MethodGet, url+path, nil)
					if err != nil {
						answers <- answer{err: err}
						return
					}
					req.Header.Set("Authorization", admin)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						answers <- answer{err: err}
						return
					}
					defer resp.Body.Close()
					raw, err := io.ReadAll(resp.Body)
					answers <- answer{resp.StatusCode, resp.Header, raw, err}
				}()
			}
			got := map[int]answer{}
			for range 2 {
				a := <-answers
				if a.err != nil {
					t.Fatal(a.err)
				}
				got[a.status] = a
			}
			ok, busy := got[http.StatusOK], got[http.StatusTooManyRequests]
			if len(got) != 2 || ok.status == 0 || busy.status == 0 {
				t.Fatalf("answers %v, want one 200 and one 429", slices.Collect(maps.Keys(got)))
			}
			if len(ok.raw) == 0 {
				t.Error("the profile served is empty")
			}
			errorBody(t, "GET "+path+" while another runs", busy.raw, protocol.CodeRateLimitExceeded)
			if ra, err := strconv.Atoi(busy.hdr.Get("Retry-After")); err != nil || ra < 1 || ra > 2 {
				t.Errorf("Retry-After %q, want 1 or 2 (seconds the running one has left)", busy.hdr.Get("Retry-After"))
			}
			status, _, raw := send(t, url, http.MethodGet, strings.Replace(path, "seconds=2", "seconds=1", 1), "", admin)
			if status != http.StatusOK {
				t.Errorf("GET %s after the first ended: %d %.200q", path, status, raw)
			}
		})
	}
}

// cpuProfiles makes the tests that take a CPU profile or a trace take
// turns: the runtime runs one of each per process, while each test's
// server guards only its own.
var cpuProfiles sync.Mutex

// profiling holds cpuProfiles until the test ends.
func profiling(t *testing.T) {
	cpuProfiles.Lock()
	t.Cleanup(cpuProfiles.Unlock)
}
