package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// With --token-ttl 5s a session token from login is refused once it
// expires, while an API token made by "rscoord token create" for the same
// MEMBER user still heartbeats and reads producer routing, until "rscoord
// token revoke" ends it. Both mutations are in the audit log.
func TestAPITokenOutlivesSessionTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds, err := credtest.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, filepath.Join(dir, "data"), "--token-ttl", "5s", "--users", creds.UsersFile)
	admin := coordtest.Remote(t, p.url).As(coordtest.Basic("admin", testAdminPassword))
	admin.CreateStream("orders", 2)
	cli := func(args ...string) cliResult {
		t.Helper()
		args = append(args, "--server", p.url, "--admin-user", "admin", "--password", testAdminPassword)
		res := runCLI(context.Background(), args...)
		if res.code != exitOK {
			t.Fatalf("rscoord %s: exit %d: %s", strings.Join(args, " "), res.code, res.stderr)
		}
		return res
	}

	var login protocol.LoginResponse
	coordtest.Remote(t, p.url).As(credtest.MemberAuth()).JSON(http.MethodPost, protocol.BasePath+"/auth/login", nil, http.StatusOK, &login)
	session := coordtest.Remote(t, p.url).As("Bearer " + login.AccessToken)
	apiToken := strings.TrimSpace(cli("token", "create", "--user", credtest.MemberUser, "--name", "orders-pods", "--reason", "python members").stdout)
	if !strings.HasPrefix(apiToken, "rsck1.orders-pods.") {
		t.Fatalf("token create printed %q", apiToken)
	}
	if out := cli("token", "list").stdout; !strings.Contains(out, "orders-pods") || !strings.Contains(out, credtest.MemberUser) || strings.Contains(out, apiToken) {
		t.Fatalf("token list:\n%s", out)
	}
	service := coordtest.Remote(t, p.url).As("Bearer " + apiToken)
	member := coordtest.NewMember("pod-0", "orders", "orders")
	routing := protocol.BasePath + "/streams/orders/groups/orders/producer-routing"

	start := time.Now()
	if !poll.Wait(15*time.Second, 100*time.Millisecond, func() bool {
		code, _ := session.Do(http.MethodGet, routing, nil)
		return code == http.StatusUnauthorized
	}) {
		t.Fatal("the session token still works 15 s after login with --token-ttl 5s")
	}
	if waited := time.Since(start); waited < 3*time.Second {
		t.Fatalf("the session token was refused after %v, before its 5 s", waited)
	}
	if resp := member.Beat(service); resp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat with the API token after the session token expired: %+v", resp)
	}
	if code, raw := service.Do(http.MethodGet, routing, nil); code != http.StatusOK {
		t.Fatalf("producer routing with the API token: %d %s", code, raw)
	}
	// The API token holds the MEMBER user's roles, no more.
	if code, _ := service.Do(http.MethodGet, protocol.BasePath+"/auth/tokens", nil); code != http.StatusForbidden {
		t.Fatalf("token list with a MEMBER's API token: %d, want 403", code)
	}

	cli("token", "revoke", "--name", "orders-pods", "--reason", "rotated")
	if code, raw := service.Do(http.MethodGet, routing, nil); code != http.StatusUnauthorized {
		t.Fatalf("producer routing with the revoked API token: %d %s", code, raw)
	}
	if res := runCLI(context.Background(), "token", "revoke", "--name", "orders-pods", "--server", p.url,
		"--admin-user", "admin", "--password", testAdminPassword); res.code != exitError || !strings.Contains(res.stderr, "404") {
		t.Fatalf("second revoke: exit %d: %s", res.code, res.stderr)
	}

	var page protocol.AuditPage
	admin.JSON(http.MethodGet, protocol.BasePath+"/monitoring/audit?limit=10", nil, http.StatusOK, &page)
	seen := map[protocol.AuditOperation][]string{}
	for _, e := range page.Entries {
		seen[e.Operation] = append(seen[e.Operation], e.Result.Outcome+" "+e.Reason)
	}
	raw, _ := json.Marshal(seen)
	if got := string(raw); !strings.Contains(got, `"CREATE_API_TOKEN":["ACCEPTED python members"]`) ||
		!strings.Contains(got, `"REVOKE_API_TOKEN":["REFUSED ","ACCEPTED rotated"]`) {
		t.Fatalf("audit: %s", got)
	}
}
