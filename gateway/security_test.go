package gateway_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
)

const joinBody = `{"protocolVersion":1,"requestId":"r1","memberId":"%s","memberName":"m","memberEpoch":0,"metadataVersion":0,"ownedShards":[]}`

func heartbeatPath(stream, member string) string {
	return base + "/streams/" + stream + "/groups/" + stream + "/members/" + member + "/heartbeat"
}

// TestMemberAuthByDefault: a server with authentication and default
// options refuses heartbeats without credentials, and with credentials
// that lack MEMBER.
func TestMemberAuthByDefault(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	s.CreateStream("orders", 2)
	body := strings.Replace(joinBody, "%s", "m1", 1)
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"none", "", http.StatusUnauthorized},
		{"writer", coordtest.Basic(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter)), http.StatusForbidden},
		{"member", coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember)), http.StatusOK},
		{"admin", coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin)), http.StatusOK},
	} {
		status, hdr, raw := send(t, s.URL, http.MethodPost, heartbeatPath("orders", "m1"), body, tc.authorization)
		if status != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.name, status, tc.want, raw)
		}
		checkRefusal(t, status, hdr, raw, tc.name)
	}
}

// scopedUsers are the users of the scoping tests: a tenant's pods, MEMBER
// on orders* and bound to member ids "orders-pod-*", plus READ on
// "orders" exactly.
func scopedUsers(t *testing.T) []auth.User {
	t.Helper()
	raw := `{"users":[{"username":"orders-pods","passwordHash":"HASH","roles":[],
		"grants":[{"roles":["MEMBER"],"streams":["orders*"]},{"roles":["READ"],"streams":["orders"]}],
		"memberIds":["orders-pod-*"]},
		{"username":"root","passwordHash":"HASH","roles":["ADMIN"]}]}`
	h, err := auth.HashPassword("pw", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users, err := auth.ParseUsers([]byte(strings.ReplaceAll(raw, "HASH", string(h))))
	if err != nil {
		t.Fatal(err)
	}
	return users
}

func TestScopedGrants(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{Users: scopedUsers(t)}})
	s.Authorization = coordtest.Basic("root", "pw")
	for _, p := range []string{"orders", "orders-eu", "payments"} {
		s.CreateStream(p, 2)
	}
	basic := coordtest.Basic("orders-pods", "pw")
	var tok protocol.LoginResponse
	s.As("").JSON(http.MethodPost, base+"/auth/login", protocol.LoginRequest{Username: "orders-pods", Password: "pw"}, http.StatusOK, &tok)
	if strings.Join(tok.Roles, ",") != "READ,MEMBER" {
		t.Fatalf("login roles %v", tok.Roles)
	}
	for _, cred := range []string{basic, "Bearer " + tok.AccessToken} {
		for _, tc := range []struct {
			method, path, body string
			want               int
		}{
			{"POST", heartbeatPath("orders", "orders-pod-1"), strings.Replace(joinBody, "%s", "orders-pod-1", 1), 200},
			{"POST", heartbeatPath("orders-eu", "orders-pod-2"), strings.Replace(joinBody, "%s", "orders-pod-2", 1), 200},
			{"POST", heartbeatPath("payments", "orders-pod-1"), strings.Replace(joinBody, "%s", "orders-pod-1", 1), 403},
			{"POST", heartbeatPath("orders", "payments-pod-1"), strings.Replace(joinBody, "%s", "payments-pod-1", 1), 403},
			{"GET", base + "/streams/orders/groups/orders/producer-routing", "", 200},
			{"GET", base + "/streams/payments/groups/payments/producer-routing", "", 403},
			{"GET", base + "/streams/orders/groups/orders", "", 200},
			{"GET", base + "/streams/orders-eu/groups/orders-eu", "", 403}, // READ is on "orders" exactly
			{"GET", base + "/monitoring/groups", "", 403},                  // spans every stream
			{"POST", base + "/streams/orders/scale", `{"targetShardCount":2,"requestedBy":"x","reason":"y"}`, 403},
		} {
			status, hdr, raw := send(t, s.URL, tc.method, tc.path, tc.body, cred)
			if status != tc.want {
				t.Errorf("%s %s with %.10s: %d, want %d: %s", tc.method, tc.path, cred, status, tc.want, raw)
			}
			checkRefusal(t, status, hdr, raw, tc.path)
		}
	}
}

func TestParseUsersRefusesBadScopes(t *testing.T) {
	t.Parallel()
	h, _ := auth.HashPassword("pw", bcrypt.MinCost)
	for name, entry := range map[string]string{
		"grant without streams": `"grants":[{"roles":["MEMBER"],"streams":[]}]`,
		"grant without roles":   `"grants":[{"roles":[],"streams":["a*"]}]`,
		"bad pattern":           `"grants":[{"roles":["MEMBER"],"streams":["a{b}*"]}]`,
		"star inside":           `"grants":[{"roles":["MEMBER"],"streams":["a*b"]}]`,
		"empty memberIds":       `"roles":["MEMBER"],"memberIds":[]`,
		"nothing":               `"roles":[]`,
	} {
		raw := `{"users":[{"username":"u","passwordHash":"` + string(h) + `",` + entry + `}]}`
		if _, err := auth.ParseUsers([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLogout: a revoked token is refused, also after a restart; the
// user's other tokens keep working.
func TestLogout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret, users := randomSecret(t), coordtest.TestUsers(t)
	s := coordtest.Start(t, dir, coordtest.Options{Auth: &coordtest.Auth{Secret: secret, Users: users}})
	t1, t2 := login(t, s, coordtest.UserReader), login(t, s, coordtest.UserReader)
	health := base + "/monitoring/health"
	if status, _, raw := send(t, s.URL, "POST", base+"/auth/logout", "", "Bearer "+t1); status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", status, raw)
	}
	for _, tc := range []struct {
		token string
		want  int
	}{{t1, 401}, {t2, 200}} {
		if status, _, raw := send(t, s.URL, "GET", health, "", "Bearer "+tc.token); status != tc.want {
			t.Fatalf("after logout: %d, want %d: %s", status, tc.want, raw)
		}
	}
	if status, _, _ := send(t, s.URL, "POST", base+"/auth/logout", "", "Bearer "+t1); status != http.StatusUnauthorized {
		t.Fatalf("second logout of a revoked token: %d", status)
	}
	if status, _, _ := send(t, s.URL, "POST", base+"/auth/logout", "", coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader))); status != http.StatusBadRequest {
		t.Fatalf("logout with Basic: %d", status)
	}
	// No credentials at all: 401 with its challenge, as on every route.
	status, hdr, raw := send(t, s.URL, "POST", base+"/auth/logout", "", "")
	if status != http.StatusUnauthorized {
		t.Fatalf("logout without credentials: %d %s", status, raw)
	}
	checkRefusal(t, status, hdr, raw, "logout without credentials")
	s.Stop()
	s = coordtest.Start(t, dir, coordtest.Options{Auth: &coordtest.Auth{Secret: secret, Users: users}})
	if status, _, _ := send(t, s.URL, "GET", health, "", "Bearer "+t1); status != http.StatusUnauthorized {
		t.Fatalf("revoked token after a restart: %d", status)
	}
	if status, _, _ := send(t, s.URL, "GET", health, "", "Bearer "+t2); status != http.StatusOK {
		t.Fatalf("other token after a restart: %d", status)
	}
}

// TestSecretRotation: tokens of a previous secret keep working while it
// is configured; new tokens are signed with the current one.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldSecret, newSecret := randomSecret(t), randomSecret(t)
	users := coordtest.TestUsers(t)
	s := coordtest.Start(t, dir, coordtest.Options{Auth: &coordtest.Auth{Secret: oldSecret, Users: users}})
	old := login(t, s, coordtest.UserReader)
	s.Stop()
	s = coordtest.Start(t, dir, coordtest.Options{Auth: &coordtest.Auth{Secret: newSecret, PreviousSecrets: [][]byte{oldSecret}, Users: users}})
	fresh := login(t, s, coordtest.UserReader)
	for _, tok := range []string{old, fresh} {
		if status, _, raw := send(t, s.URL, "GET", base+"/monitoring/health", "", "Bearer "+tok); status != http.StatusOK {
			t.Fatalf("during rotation: %d %s", status, raw)
		}
	}
	s.Stop()
	s = coordtest.Start(t, dir, coordtest.Options{Auth: &coordtest.Auth{Secret: newSecret, Users: users}})
	if status, _, _ := send(t, s.URL, "GET", base+"/monitoring/health", "", "Bearer "+old); status != http.StatusUnauthorized {
		t.Fatalf("token of a dropped secret: %d", status)
	}
	if status, _, _ := send(t, s.URL, "GET", base+"/monitoring/health", "", "Bearer "+fresh); status != http.StatusOK {
		t.Fatalf("token of the current secret: %d", status)
	}
}

// TestLoginThrottlePerAddress: failures of a username from one address do
// not lock that user out from another.
func TestLoginThrottlePerAddress(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{
		Auth:    &coordtest.Auth{},
		Gateway: gateway.Options{LoginFailureLimit: 3, LoginAddressFailureLimit: 100, LoginFailureWindow: time.Hour},
	})
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	try := func(c *http.Client, password string) int {
		t.Helper()
		body, _ := json.Marshal(protocol.LoginRequest{Username: coordtest.UserReader, Password: password})
		resp, err := c.Post(s.URL+base+"/auth/login", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	attacker, owner := from("127.0.0.2"), from("127.0.0.1")
	defer attacker.CloseIdleConnections()
	defer owner.CloseIdleConnections()
	for range 3 {
		if got := try(attacker, "guess"); got != http.StatusUnauthorized {
			t.Fatalf("guess: %d", got)
		}
	}
	if got := try(attacker, "guess"); got != http.StatusTooManyRequests {
		t.Fatalf("a guess past the limit: %d", got)
	}
	if got := try(owner, coordtest.Password(coordtest.UserReader)); got != http.StatusOK {
		t.Fatalf("the real user from its own address: %d", got)
	}
}
