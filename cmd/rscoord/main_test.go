package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/internal/proctest"
)

// Most of the package's time goes to tests that run replicas, etcd
// clusters and Redis and wait on them (leases, start-ups, failovers):
// those run in parallel, four at a time, which the test binary's CPU
// bears (the binaries they run are built without -race). The shared etcd
// cluster stops before the check for goroutines left behind.
func TestMain(m *testing.M) {
	proctest.DefaultParallel(4)
	b, err := proctest.NewBuilder()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builder = b
	etcdShared = &etcdtest.Shared{}
	code := m.Run()
	if err := etcdShared.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the shared etcd cluster: %v\n", err)
		code = max(code, 1)
	}
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	b.Close()
	os.Exit(code)
}

// builder builds the binary for the tests that run it; set once by
// TestMain before any test runs.
var builder *proctest.Builder

// etcdShared is the etcd cluster of the cluster-mode tests
// (newTestCluster); set once by TestMain before any test runs.
var etcdShared *etcdtest.Shared

// wantRequest is the one request a command must send.
type wantRequest struct {
	method string
	// path is the escaped request path, e.g. /coord/v1/streams/orders.
	path string
	// body is the expected JSON body, compared as JSON values; "" means
	// the request must have no body.
	body string
	// authorization is the expected Authorization header; "" means none.
	authorization string
}

// cliCase runs one command line against a canned coordinator.
type cliCase struct {
	name string
	// args is the command line; the harness appends --server.
	args []string
	// want is the request the server must see; nil means no request at all
	// (the command must fail or finish before talking to the server).
	want *wantRequest
	// status and answer are the canned response (status 0 means 200).
	status int
	answer string
	// header is added to the canned response.
	header map[string]string

	wantCode int
	// wantOut are substrings of stdout, in this order.
	wantOut []string
	// notOut must not occur in stdout.
	notOut []string
	// wantErr is a substring of stderr; "" means stderr must be empty.
	wantErr string
	// wantJSON asserts that stdout is one valid JSON value.
	wantJSON bool
}

// cliResult is what a command line printed and returned.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs args in-process through kong, as main does.
func runCLI(ctx context.Context, args ...string) cliResult {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// runCases runs each case against its own httptest server.
func runCases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				checkRequest(t, tc.want, r)
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				status := tc.status
				if status == 0 {
					status = http.StatusOK
				}
				w.WriteHeader(status)
				_, _ = io.WriteString(w, tc.answer)
			}))
			defer srv.Close()

			res := runCLI(context.Background(), append(tc.args, "--server", srv.URL)...)
			checkResult(t, tc, res)
			wantRequests := int32(0)
			if tc.want != nil {
				wantRequests = 1
			}
			if got := requests.Load(); got != wantRequests {
				t.Errorf("server saw %d requests, want %d", got, wantRequests)
			}
		})
	}
}

// checkRequest compares the request with want.
func checkRequest(t *testing.T, want *wantRequest, r *http.Request) {
	t.Helper()
	if want == nil {
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
		return
	}
	if r.Method != want.method {
		t.Errorf("method = %s, want %s", r.Method, want.method)
	}
	if got := r.URL.EscapedPath(); got != want.path {
		t.Errorf("path = %s, want %s", got, want.path)
	}
	if r.URL.RawQuery != "" {
		t.Errorf("query = %q, want none", r.URL.RawQuery)
	}
	if got := r.Header.Get("Authorization"); got != want.authorization {
		t.Errorf("Authorization = %q, want %q", got, want.authorization)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("read body: %v", err)
		return
	}
	if want.body == "" {
		if len(body) != 0 {
			t.Errorf("body = %s, want none", body)
		}
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got, exp any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Errorf("body %s is not JSON: %v", body, err)
		return
	}
	if err := json.Unmarshal([]byte(want.body), &exp); err != nil {
		t.Fatalf("bad test: want.body %s: %v", want.body, err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("body = %s, want %s", body, want.body)
	}
}

// checkResult compares exit code and output with the case.
func checkResult(t *testing.T, tc cliCase, res cliResult) {
	t.Helper()
	if res.code != tc.wantCode {
		t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", res.code, tc.wantCode, res.stdout, res.stderr)
	}
	rest := res.stdout
	for _, w := range tc.wantOut {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("stdout lacks %q (in order)\nstdout:\n%s", w, res.stdout)
			break
		}
		rest = rest[i+len(w):]
	}
	for _, n := range tc.notOut {
		if strings.Contains(res.stdout, n) {
			t.Errorf("stdout has %q\nstdout:\n%s", n, res.stdout)
		}
	}
	if tc.wantErr == "" && res.stderr != "" {
		t.Errorf("stderr = %q, want empty", res.stderr)
	}
	if tc.wantErr != "" {
		if !strings.Contains(res.stderr, tc.wantErr) {
			t.Errorf("stderr = %q, want it to contain %q", res.stderr, tc.wantErr)
		}
		if !strings.HasPrefix(res.stderr, "rscoord: ") || strings.Count(res.stderr, "\n") != 1 {
			t.Errorf("stderr = %q, want one line starting with \"rscoord: \"", res.stderr)
		}
	}
	if tc.wantJSON && !json.Valid([]byte(res.stdout)) {
		t.Errorf("stdout is not valid JSON:\n%s", res.stdout)
	}
}

func TestUsage(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{name: "help", args: []string{"--help"}, wantCode: 0,
			wantOut: []string{"Usage: rscoord", "serve", "stream create", "stream scale", "stream status",
				"group get", "group delete", "group members", "group assignments", "version"}},
		{name: "command help shows admin flags", args: []string{"group", "members", "--help"}, wantCode: 0,
			wantOut: []string{"<prefix>", "<group>", "--server", "RSCOORD_SERVER", "--json", "--timeout=10s"}},
		{name: "no command shows help on stderr", args: nil, wantCode: exitUsage, wantErr: "Usage: rscoord"},
		{name: "unknown command", args: []string{"nope"}, wantCode: exitUsage, wantErr: "nope"},
		{name: "missing argument", args: []string{"group", "get", "orders"}, wantCode: exitUsage, wantErr: "<group>"},
		{name: "version", args: []string{"version"}, wantCode: 0, wantOut: []string{"rscoord ", "protocol versions 1..1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(context.Background(), tc.args...)
			if res.code != tc.wantCode {
				t.Errorf("exit code = %d, want %d; stderr %q", res.code, tc.wantCode, res.stderr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, res.stdout)
				}
			}
			if tc.wantErr != "" && !strings.Contains(res.stderr, tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", res.stderr, tc.wantErr)
			}
			if tc.wantErr == "" && res.stderr != "" {
				t.Errorf("stderr = %q, want empty", res.stderr)
			}
		})
	}
}

// TestServerFromEnv checks that RSCOORD_SERVER is used when --server is absent.
func TestServerFromEnv(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, `{"members":[]}`)
	}))
	defer srv.Close()
	t.Setenv("RSCOORD_SERVER", srv.URL)

	res := runCLI(context.Background(), "group", "members", "orders", "orders")
	if res.code != 0 || requests.Load() != 1 {
		t.Fatalf("code %d, %d requests, stderr %q; want 0 and 1 request", res.code, requests.Load(), res.stderr)
	}
}

func TestBadServerFlag(t *testing.T) {
	for _, server := range []string{"ftp://127.0.0.1:1", "://127.0.0.1:8080", "http://", "http://h:1/?q=1"} {
		res := runCLI(context.Background(), "group", "get", "orders", "orders", "--server", server)
		if res.code != exitError || !strings.Contains(res.stderr, "--server") {
			t.Errorf("--server %q: code %d stderr %q, want %d and a --server error", server, res.code, res.stderr, exitError)
		}
	}
}

// TestTimeout checks that --timeout bounds a request and says so.
func TestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()

	start := time.Now()
	res := runCLI(context.Background(), "group", "get", "orders", "orders", "--server", srv.URL, "--timeout", "50ms")
	if res.code != exitError || !strings.Contains(res.stderr, "no answer within 50ms") {
		t.Errorf("code %d stderr %q, want %d and a timeout message", res.code, res.stderr, exitError)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %s, want about 50ms", elapsed)
	}
}

// TestCancelledContext checks that the signal context reaches the request.
func TestCancelledContext(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	res := runCLI(ctx, "group", "get", "orders", "orders", "--server", srv.URL)
	if res.code != exitError || !strings.Contains(res.stderr, "context canceled") {
		t.Errorf("code %d stderr %q, want %d and context canceled", res.code, res.stderr, exitError)
	}
	if requests.Load() != 0 {
		t.Errorf("server saw %d requests after cancel, want 0", requests.Load())
	}
}

// TestUnreachableServer checks the message when nothing listens.
func TestUnreachableServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()

	res := runCLI(context.Background(), "stream", "status", "orders", "--server", url)
	if res.code != exitError || !strings.Contains(res.stderr, "GET "+url+"/coord/v1/monitoring/groups") {
		t.Errorf("code %d stderr %q, want %d and the failed request", res.code, res.stderr, exitError)
	}
}
