package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// hostRequest sends method path to p with the Host header host and
// returns the status and body.
func hostRequest(t *testing.T, p *process, method, path, host, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// TestBinaryNoAuthOnLoopbackRefusesOtherHosts: a development server
// (--no-auth or --no-member-auth) on a loopback address answers only
// requests that name this machine in Host. Otherwise any web page its
// user opens could reach it by DNS rebinding (a name of the attacker's
// that first resolves to the attacker's server, then to 127.0.0.1: the
// page's calls are then same-origin, so neither CORS nor the cross-origin
// check stops them) and administer it as the anonymous ADMIN, or
// heartbeat as any member. A server with authentication on still answers
// any Host: a proxy on the same machine may forward its public name.
func TestBinaryNoAuthOnLoopbackRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	create := `{"requestedBy":"t"}`
	for _, tc := range []struct {
		name  string
		flags []string
		path  string
		body  string
	}{
		{"no-auth", []string{"--no-auth"}, protocol.BasePath + "/streams/rebound", create},
		{"no-member-auth", []string{"--no-member-auth"}, protocol.BasePath + "/streams/orders/groups/orders/members/m1/heartbeat",
			`{"protocolVersion":1,"requestId":"r","memberId":"m1","ownedShards":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProcess(t, t.TempDir(), tc.flags...)
			u, err := url.Parse(p.url)
			if err != nil {
				t.Fatal(err)
			}
			_, port := u.Hostname(), u.Port()
			status, body := hostRequest(t, p, http.MethodPost, tc.path, "rebind.evil.example:"+port, tc.body)
			if status != http.StatusForbidden || !strings.Contains(body, `"FORBIDDEN"`) {
				t.Errorf("Host rebind.evil.example: %d %s; want 403 FORBIDDEN", status, body)
			}
			for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "localhost", "[::1]:" + port} {
				if status, body := hostRequest(t, p, http.MethodGet, "/healthz", host, ""); status != http.StatusOK {
					t.Errorf("Host %s: %d %s; want 200", host, status, body)
				}
			}
			if err := p.stop(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Authentication on: any Host (a proxy forwarding its public name).
	p := startProcess(t, t.TempDir())
	if status, body := hostRequest(t, p, http.MethodGet, "/healthz", "coord.example.com", ""); status != http.StatusOK {
		t.Errorf("authentication on, Host coord.example.com: %d %s; want 200", status, body)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
