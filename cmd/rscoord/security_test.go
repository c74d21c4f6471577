package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/auth"
)

// writeUsers writes a users file with the tenant user "orders-pods" (MEMBER
// and READ on orders*, bound to member ids "orders-pod-*") of password.
func writeUsers(t *testing.T, path, password string) {
	t.Helper()
	h, err := auth.HashPassword(password, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	raw := `{"users":[{"username":"orders-pods","passwordHash":"` + string(h) + `","roles":[],
		"grants":[{"roles":["MEMBER","READ"],"streams":["orders*"]}],"memberIds":["orders-pod-*"]}]}`
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBinarySecureDefaults: a default server refuses unauthenticated
// heartbeats, a MEMBER scoped to orders* gets 403 on payments, and a token
// issued before a password change (users file edited, server restarted)
// answers 401.
func TestBinarySecureDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, users := filepath.Join(dir, "data"), filepath.Join(dir, "users.json")
	writeUsers(t, users, "first-pw")
	p := startProcess(t, data, "--users", users)
	admin := coordtest.Remote(t, p.url)
	admin.Authorization = coordtest.Basic("admin", testAdminPassword)
	admin.CreateStream("orders", 2)
	admin.CreateStream("payments", 2)

	join := func(id string) protocol.HeartbeatRequest {
		return protocol.HeartbeatRequest{ProtocolVersion: 1, RequestID: "r", MemberID: id, OwnedShards: []protocol.Shard{}}
	}
	hb := func(s *coordtest.Server, stream, id string) int {
		t.Helper()
		status, _ := s.Do(http.MethodPost, protocol.BasePath+"/streams/"+stream+"/groups/"+stream+"/members/"+id+"/heartbeat", join(id))
		return status
	}
	if got := hb(coordtest.Remote(t, p.url), "orders", "orders-pod-1"); got != http.StatusUnauthorized {
		t.Fatalf("unauthenticated heartbeat on a default server: %d", got)
	}
	var login protocol.LoginResponse
	coordtest.Remote(t, p.url).JSON(http.MethodPost, protocol.BasePath+"/auth/login",
		protocol.LoginRequest{Username: "orders-pods", Password: "first-pw"}, http.StatusOK, &login)
	tenant := coordtest.Remote(t, p.url)
	tenant.Authorization = "Bearer " + login.AccessToken
	for _, tc := range []struct {
		stream, id string
		want       int
	}{{"orders", "orders-pod-1", 200}, {"payments", "orders-pod-1", 403}, {"orders", "admin-pod", 403}} {
		if got := hb(tenant, tc.stream, tc.id); got != tc.want {
			t.Fatalf("tenant heartbeat on %s as %s: %d, want %d", tc.stream, tc.id, got, tc.want)
		}
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// Same password file: the token survives a restart.
	p = startProcess(t, data, "--users", users)
	tenant = coordtest.Remote(t, p.url)
	tenant.Authorization = "Bearer " + login.AccessToken
	if got := hb(tenant, "orders", "orders-pod-1"); got != http.StatusOK {
		t.Fatalf("token after a plain restart: %d", got)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A new password: the old token is dead.
	writeUsers(t, users, "second-pw")
	p = startProcess(t, data, "--users", users)
	tenant = coordtest.Remote(t, p.url)
	tenant.Authorization = "Bearer " + login.AccessToken
	status, raw := tenant.Do(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil)
	if status != http.StatusUnauthorized || !strings.Contains(string(raw), "revoked") {
		t.Fatalf("token after a password change: %d %s", status, raw)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryNoMemberAuth: --no-member-auth warns, and heartbeats need no
// credentials.
func TestBinaryNoMemberAuth(t *testing.T) {
	t.Parallel()
	p := startProcess(t, t.TempDir(), "--no-member-auth")
	if !strings.Contains(p.output(), "member authentication is OFF") {
		t.Fatalf("no warning; stderr:\n%s", p.output())
	}
	admin := coordtest.Remote(t, p.url)
	admin.Authorization = coordtest.Basic("admin", testAdminPassword)
	admin.CreateStream("orders", 2)
	m := coordtest.NewMember("m", "orders", "orders")
	if resp := m.Beat(coordtest.Remote(t, p.url)); resp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat without credentials: %+v", resp)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
