package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeRedisLogsAreJSON runs the binary with --log-format json and a
// --redis nobody listens on: go-redis's own lines (its failed dials) come
// out as JSON records of the server's logger, and stderr holds nothing
// but JSON lines.
func TestServeRedisLogsAreJSON(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, t.TempDir(), "--redis", closed)
	// Readiness does not ask Redis (heartbeats never wait on it); the
	// metrics collector's round does: a dial that fails.
	resp, err := http.Get(p.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz with Redis down: %d, want 200", resp.StatusCode)
	}
	line, err := p.proc.WaitForLine(10*time.Second, func(line string) bool {
		return strings.Contains(line, `"component":"go-redis"`) && strings.Contains(line, "failed to dial")
	})
	if err != nil {
		t.Fatalf("no go-redis record: %v\n%s", err, p.output())
	}
	var rec struct{ Level, Msg string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Level != "WARN" || strings.HasPrefix(rec.Msg, "redis: ") {
		t.Errorf("go-redis record %s: %+v, %v; want a WARN without go-redis's prefix", line, rec, err)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.output())
	}
	for _, l := range strings.Split(strings.TrimSpace(p.output()), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("a line that is not JSON under --log-format json: %q", l)
		}
	}
}
