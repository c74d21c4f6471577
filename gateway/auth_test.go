package gateway_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
)

// endpoint is one route of the matrix with a request whose answer, for a
// caller that may use it, does not change when repeated.
type endpoint struct {
	method, path, body string
	// perm is what the route needs (0: nothing).
	perm auth.Permission
	// ok is the status an allowed caller gets: 2xx or the endpoint's own 4xx.
	ok int
}

func matrixEndpoints(memberAuth bool) []endpoint {
	hb := `{"protocolVersion":1,"requestId":"r1","memberId":"mx","memberName":"m","memberEpoch":0,"metadataVersion":0,
		"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]}`
	hbPerm := auth.Permission(0)
	if memberAuth {
		hbPerm = auth.PermMember
	}
	scaleNoop := `{"targetShardCount":4,"requestedBy":"ops","reason":"noop"}`
	op := `{"requestedBy":"ops","reason":"r"}`
	r, w := auth.PermRead, auth.PermWrite
	return []endpoint{
		{"POST", base + "/streams/orders", `{"requestedBy":"ops"}`, w, 409},
		{"DELETE", base + "/streams/nope", op, w, 404},
		{"POST", base + "/streams/orders/scale", scaleNoop, w, 202},
		{"POST", base + "/streams/orders/migrations/rs-9/complete", op, w, 404},
		{"GET", base + "/streams/orders/autoscale", "", r, 200},
		{"PUT", base + "/streams/orders/autoscale", `{"mode":"off","requestedBy":"ops"}`, auth.PermAdmin, 200},
		{"POST", base + "/streams/orders/groups/orders", `{"requestedBy":"ops"}`, w, 409},
		{"GET", base + "/streams/orders/groups/orders", "", r, 200},
		{"DELETE", base + "/streams/orders/groups/nope", op, w, 404},
		{"POST", base + "/streams/orders/groups/orders/offsets/reset", `{"requestedBy":"ops","to":"EARLIEST"}`, w, 200},
		{"GET", base + "/streams/orders/groups/orders/producer-routing", "", auth.PermRouting, 200},
		{"POST", base + "/streams/orders/groups/orders/scale", scaleNoop, w, 202},
		{"GET", base + "/streams/orders/groups/orders/migrations/rs-9", "", r, 404},
		{"POST", base + "/streams/orders/groups/orders/migrations/rs-9/rollback", op, w, 404},
		{"POST", base + "/streams/orders/groups/orders/members/mx/heartbeat", hb, hbPerm, 200},
		{"GET", base + "/monitoring/health", "", r, 200},
		{"GET", base + "/monitoring/session", "", r, 200},
		{"GET", base + "/monitoring/compatibility", "", r, 200},
		{"GET", base + "/monitoring/groups", "", r, 200},
		// 404: the test server runs alone, not in a cluster.
		{"GET", base + "/monitoring/cluster", "", r, 404},
		{"GET", base + "/monitoring/audit", "", r, 200},
		{"GET", base + "/monitoring/streams/orders/groups/orders", "", r, 200},
		{"GET", base + "/monitoring/streams/orders/groups/orders/members", "", r, 200},
		{"GET", base + "/monitoring/streams/orders/groups/orders/assignments", "", r, 200},
		{"GET", base + "/monitoring/streams/orders/groups/orders/consumption", "", r, 200},
		{"GET", base + "/monitoring/streams/orders/groups/orders/migrations", "", r, 200},
		{"GET", base + "/monitoring/streams/orders/groups/orders/shards", "", r, 503},
		{"GET", base + "/monitoring/streams/orders/groups/orders/offsets", "", r, 503},
		{"GET", base + "/monitoring/streams/orders/groups/orders/history", "", r, 200},
		{"GET", base + "/monitoring/streams/orders/groups/orders/shards/0/messages", "", r, 503},
		{"GET", base + "/monitoring/grafana/groups", "", r, 200},
		{"GET", base + "/monitoring/grafana/members", "", r, 200},
		{"GET", base + "/monitoring/grafana/assignments", "", r, 200},
		{"GET", base + "/monitoring/grafana/shards", "", r, 503},
		{"GET", base + "/monitoring/grafana/messages?streamPrefix=orders&shard=0", "", r, 503},
		{"GET", base + "/monitoring/grafana/options/streams", "", r, 200},
		{"GET", base + "/monitoring/grafana/options/consumer-groups", "", r, 200},
		{"GET", base + "/monitoring/grafana/options/shards", "", r, 200},
		// 404: the test server keeps no API tokens (no store).
		{"POST", base + "/auth/tokens", `{"username":"admin","name":"n","requestedBy":"ops"}`, auth.PermAdmin, 404},
		{"GET", base + "/auth/tokens", "", auth.PermAdmin, 404},
		{"DELETE", base + "/auth/tokens/n", op, auth.PermAdmin, 404},
		{"GET", "/metrics", "", r, 200},
		{"GET", "/actuator/prometheus", "", r, 200},
		{"GET", "/debug/pprof/cmdline", "", auth.PermAdmin, 200},
		{"GET", "/openapi.yaml", "", 0, 200},
		{"GET", "/healthz", "", 0, 200},
		{"HEAD", "/healthz", "", 0, 200},
		{"GET", "/readyz", "", 0, 200},
		{"HEAD", "/readyz", "", 0, 200},
		{"GET", "/console", "", 0, 200},
		{"GET", "/console/app.js", "", 0, 200},
		// The API explorer, the document as JSON and the actuator probes.
		{"GET", "/scalar", "", 0, 200},
		{"GET", "/swagger-ui.html", "", 0, 200},
		{"GET", "/swagger-ui/init.js", "", 0, 200},
		{"GET", "/v3/api-docs", "", 0, 200},
		{"GET", "/actuator/health", "", 0, 200},
		{"GET", "/actuator/info", "", auth.PermRead, 200},
	}
}

// TestAuthMatrixCoversEveryRoute fails when a route is added without a
// row in the matrix above (login and logout have tests of their own).
func TestAuthMatrixCoversEveryRoute(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	engine := gateway.New(newFake(), gateway.Options{Auth: s.Auth, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).(*gin.Engine)
	param := regexp.MustCompile(`:[A-Za-z]+`)
	wildcard := regexp.MustCompile(`\*[A-Za-z]+`)
	for _, rt := range engine.Routes() {
		if rt.Path == base+"/auth/login" || rt.Path == base+"/auth/logout" {
			continue
		}
		pattern := regexp.MustCompile("^" + wildcard.ReplaceAllString(param.ReplaceAllString(rt.Path, `[^/]+`), `.+`) + "$")
		covered := false
		for _, ep := range matrixEndpoints(false) {
			path, _, _ := strings.Cut(ep.path, "?")
			covered = covered || (ep.method == rt.Method && pattern.MatchString(path))
		}
		if !covered {
			t.Errorf("route %s %s has no row in the auth matrix", rt.Method, rt.Path)
		}
	}
}

// allowedRoles is docs/protocol.md §4 written out, independent of package auth:
// which role names may use a route of each permission.
var allowedRoles = map[auth.Permission][]string{
	auth.PermRead:    {"READ", "MONITOR", "WRITE", "ADMIN"},
	auth.PermWrite:   {"WRITE", "ADMIN"},
	auth.PermRouting: {"READ", "MONITOR", "WRITE", "MEMBER", "ADMIN"},
	auth.PermMember:  {"MEMBER", "ADMIN"},
	auth.PermAdmin:   {"ADMIN"},
}

// allowed reports whether a caller with roles may use a route needing perm.
func allowed(roles auth.Roles, perm auth.Permission) bool {
	for _, have := range roles.Names() {
		for _, ok := range allowedRoles[perm] {
			if have == ok {
				return true
			}
		}
	}
	return false
}

// credential is one way of (not) proving who you are.
type credential struct {
	name   string
	header string
	// roles are the caller's roles; valid is false for credentials that
	// must be refused with 401.
	roles auth.Roles
	valid bool
}

// randomSecret is a token secret for one test.
func randomSecret(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// tokenFor issues a token with an authenticator of its own, for tokens the
// server did not issue: expired ones, ones of another secret.
func tokenFor(t *testing.T, secret []byte, user string, roles auth.Roles, now time.Time) string {
	t.Helper()
	a, err := auth.New(auth.Config{Users: coordtest.TestUsers(t), Secret: secret, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.Issue(auth.Principal{Username: user, Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Value
}

// login logs user in through the API and returns the access token.
func login(t *testing.T, s *coordtest.Server, user string) string {
	t.Helper()
	var resp protocol.LoginResponse
	s.As("").JSON(http.MethodPost, base+"/auth/login",
		protocol.LoginRequest{Username: user, Password: coordtest.Password(user)}, http.StatusOK, &resp)
	if resp.AccessToken == "" || resp.TokenType != "Bearer" {
		t.Fatalf("login of %s: %+v", user, resp)
	}
	return resp.AccessToken
}

func credentials(t *testing.T, s *coordtest.Server, secret []byte) []credential {
	users := []struct {
		name  string
		roles auth.Roles
	}{
		{coordtest.UserReader, auth.Read}, {coordtest.UserWriter, auth.Write}, {coordtest.UserMember, auth.Member},
		{coordtest.UserAdmin, auth.Admin}, {coordtest.UserMonitor, auth.Monitor},
	}
	out := []credential{
		{name: "none"},
		{name: "bad password", header: coordtest.Basic(coordtest.UserAdmin, "wrong")},
		{name: "unknown user", header: coordtest.Basic("nobody", "x")},
		{name: "garbage basic", header: "Basic %%%"},
		{name: "unknown scheme", header: "Digest abc"},
		{name: "bad token", header: "Bearer not-a-token"},
		{name: "expired token", header: "Bearer " + tokenFor(t, secret, coordtest.UserAdmin, auth.Admin, time.Now().Add(-8*24*time.Hour))},
		{name: "token of another secret", header: "Bearer " + tokenFor(t, randomSecret(t), coordtest.UserAdmin, auth.Admin, time.Now())},
	}
	for _, u := range users {
		out = append(out,
			credential{name: "basic " + u.name, header: coordtest.Basic(u.name, coordtest.Password(u.name)), roles: u.roles, valid: true},
			credential{name: "bearer " + u.name, header: "Bearer " + login(t, s, u.name), roles: u.roles, valid: true})
	}
	reader := coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader))
	out = append(out,
		credential{name: "lowercase basic reader", header: "basic" + strings.TrimPrefix(reader, "Basic"), roles: auth.Read, valid: true},
		credential{name: "lowercase bearer writer", header: "bearer " + login(t, s, coordtest.UserWriter), roles: auth.Write, valid: true},
		credential{name: "uppercase BEARER member", header: "BEARER " + login(t, s, coordtest.UserMember), roles: auth.Member, valid: true})
	return out
}

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	for _, memberAuth := range []bool{false, true} {
		t.Run(fmt.Sprintf("memberAuth=%v", memberAuth), func(t *testing.T) {
			t.Parallel()
			secret := randomSecret(t)
			s := serveFake(t, newFake("orders"), fakeOptions{Auth: true, Secret: secret,
				Gateway: gateway.Options{NoMemberAuth: !memberAuth}})
			creds := credentials(t, s, secret)
			for _, ep := range matrixEndpoints(memberAuth) {
				for _, cr := range creds {
					want := ep.ok
					switch {
					case ep.perm == 0:
					case !cr.valid:
						want = http.StatusUnauthorized
					case !allowed(cr.roles, ep.perm):
						want = http.StatusForbidden
					}
					status, hdr, raw := send(t, s.URL, ep.method, ep.path, ep.body, cr.header)
					if status != want {
						t.Errorf("%s %s with %s: %d, want %d: %.200s", ep.method, ep.path, cr.name, status, want, raw)
						continue
					}
					checkRefusal(t, status, hdr, raw, ep.method+" "+ep.path+" with "+cr.name)
				}
			}
		})
	}
}

// checkRefusal checks the body and headers of a 401 or 403.
func checkRefusal(t *testing.T, status int, hdr http.Header, raw []byte, what string) {
	t.Helper()
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return
	}
	var body protocol.ErrorBody
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Errorf("%s: %d without an error body: %s", what, status, raw)
		return
	}
	wantCode := protocol.CodeUnauthorized
	if status == http.StatusForbidden {
		wantCode = protocol.CodeForbidden
	}
	if body.ErrorCode != wantCode || body.Status != protocol.StatusName(status) || body.Message == "" {
		t.Errorf("%s: body %+v, want %s", what, body, wantCode)
	}
	challenge := hdr.Get("WWW-Authenticate")
	if status == http.StatusUnauthorized && challenge != `Basic realm="rscoord"` {
		t.Errorf("%s: WWW-Authenticate %q", what, challenge)
	}
	if hdr.Get(gateway.RequestIDHeader) == "" {
		t.Errorf("%s: no request id in the answer", what)
	}
}

// send makes one request with an optional Authorization header.
func send(t *testing.T, url, method, path, body, authorization string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return roundTrip(t, req)
}

// roundTrip sends req and returns the status, headers and whole body.
func roundTrip(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

func TestSession(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	var sess protocol.Session
	s.As(coordtest.Basic(coordtest.UserMonitor, coordtest.Password(coordtest.UserMonitor))).
		JSON(http.MethodGet, base+"/monitoring/session", nil, http.StatusOK, &sess)
	if !sess.Authenticated || sess.Username != coordtest.UserMonitor || strings.Join(sess.Roles, ",") != "MONITOR" {
		t.Fatalf("session = %+v", sess)
	}
	s.As("Bearer "+login(t, s, coordtest.UserWriter)).JSON(http.MethodGet, base+"/monitoring/session", nil, http.StatusOK, &sess)
	if !sess.Authenticated || sess.Username != coordtest.UserWriter || strings.Join(sess.Roles, ",") != "WRITE" {
		t.Fatalf("session = %+v", sess)
	}

	// With authentication off every caller is an anonymous ADMIN, whatever
	// it sends.
	off := serveFake(t, newFake(), fakeOptions{})
	off.As("Bearer garbage").JSON(http.MethodGet, base+"/monitoring/session", nil, http.StatusOK, &sess)
	if sess.Authenticated || sess.Username != auth.AnonymousName || strings.Join(sess.Roles, ",") != "ADMIN" {
		t.Fatalf("session with auth off = %+v", sess)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	req, _ := http.NewRequest(http.MethodGet, s.URL+base+"/monitoring/health", nil)
	req.Header.Set(gateway.RequestIDHeader, "my-req.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(gateway.RequestIDHeader); got != "my-req.1" {
		t.Fatalf("echoed request id %q", got)
	}
	req.Header.Set(gateway.RequestIDHeader, "bad id\twith spaces")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(gateway.RequestIDHeader); got == "" || strings.Contains(got, " ") {
		t.Fatalf("a bad request id must be replaced, got %q", got)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestRoutingRegistersOnlyForMembersAndWriters: producer routing registers
// an unknown group on the fly (auto-create on) only for a caller that could
// join or create it. A READ or MONITOR credential, a dashboard's, gets
// GROUP_NOT_FOUND and changes nothing: a registration is durable and, with
// Redis, leaves a consumer group on every shard that a scale-in's drain
// proof counts.
func TestRoutingRegistersOnlyForMembersAndWriters(t *testing.T) {
	t.Parallel()
	f := newFake("orders")
	f.autoCreate = true
	s := serveFake(t, f, fakeOptions{Auth: true})
	basic := func(user string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+coordtest.Password(user)))
	}
	for _, tc := range []struct {
		user   string
		status int
	}{
		{coordtest.UserReader, http.StatusNotFound},
		{coordtest.UserMonitor, http.StatusNotFound},
		{coordtest.UserMember, http.StatusOK},
		{coordtest.UserWriter, http.StatusOK},
		{coordtest.UserAdmin, http.StatusOK},
	} {
		t.Run(tc.user, func(t *testing.T) {
			group := "by-" + tc.user
			path := base + "/streams/orders/groups/" + group + "/producer-routing"
			status, _, raw := send(t, s.URL, http.MethodGet, path, "", basic(tc.user))
			if status != tc.status {
				t.Fatalf("routing of an unknown group: %d, want %d: %s", status, tc.status, raw)
			}
			registered, _, raw := send(t, s.URL, http.MethodGet, base+"/streams/orders/groups/"+group, "", basic(coordtest.UserAdmin))
			if want := tc.status == http.StatusOK; (registered == http.StatusOK) != want {
				t.Fatalf("group registered: %d (%s), want registered %v", registered, raw, want)
			}
			if tc.status == http.StatusNotFound && !strings.Contains(string(raw), string(protocol.CodeGroupNotFound)) {
				t.Fatalf("not registered, but not GROUP_NOT_FOUND: %s", raw)
			}
		})
	}
}
