package gateway_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// TestLoginFailuresOfImpossibleNamesShareOneKey: failed logins under
// names no user can have (over 200 bytes, or characters outside
// [A-Za-z0-9._@-]) count under one key per client address, so the
// per-user limit's memory holds no attacker-chosen name of up to the
// 16 KiB login body (64 KiB of Basic header) per failure: past the limit
// such names from that address answer 429, while a real user from the
// same address still logs in.
func TestLoginFailuresOfImpossibleNamesShareOneKey(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{
		Auth:    &coordtest.Auth{},
		Gateway: gateway.Options{LoginFailureLimit: 3, LoginAddressFailureLimit: 100, LoginFailureWindow: time.Hour},
	})
	try := func(user, password string) int {
		t.Helper()
		body, _ := json.Marshal(protocol.LoginRequest{Username: user, Password: password})
		status, _, _ := send(t, s.URL, http.MethodPost, base+"/auth/login", string(body), "")
		return status
	}
	for i := range 3 {
		if got := try(strings.Repeat("x", 8<<10)+strconv.Itoa(i), "guess"); got != http.StatusUnauthorized {
			t.Fatalf("long name %d: %d, want 401", i, got)
		}
	}
	if got := try("no such user!", "guess"); got != http.StatusTooManyRequests {
		t.Fatalf("a fourth impossible name: %d, want 429 (one key for all)", got)
	}
	if got := try(coordtest.UserReader, coordtest.Password(coordtest.UserReader)); got != http.StatusOK {
		t.Fatalf("a real user from the same address: %d", got)
	}
}

// TestFullLoginLimitersLockNoUserOut: an attacker who fills the failed-
// login tables (usernames from its address, then addresses) must not
// lock real users out: once a table holds its bound, a login or Basic
// check it has no window for goes through it uncounted (the other table
// still counts, as long as it has room), never 429. Windows already held
// keep counting.
func TestFullLoginLimitersLockNoUserOut(t *testing.T) {
	t.Parallel()
	reader := coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader))
	s := coordtest.Start(t, "", coordtest.Options{
		Auth: &coordtest.Auth{},
		Gateway: gateway.Options{LoginFailureLimit: 2, LoginAddressFailureLimit: 100, LoginFailureWindow: time.Hour,
			LoginFailureKeys: 3},
	})
	try := func(user, password string) int {
		t.Helper()
		body, _ := json.Marshal(protocol.LoginRequest{Username: user, Password: password})
		status, _, _ := send(t, s.URL, http.MethodPost, base+"/auth/login", string(body), "")
		return status
	}
	// The username table fills: three names failed from this address (the
	// address table holds one window).
	for _, name := range []string{"u1", "u2", "u3"} {
		if got := try(name, "guess"); got != http.StatusUnauthorized {
			t.Fatalf("filling with %s: %d, want 401", name, got)
		}
	}
	// A held window keeps counting: u1's second failure reaches its limit.
	if got := try("u1", "guess"); got != http.StatusUnauthorized {
		t.Fatalf("u1 again: %d, want 401", got)
	}
	if got := try("u1", "guess"); got != http.StatusTooManyRequests {
		t.Fatalf("u1 past its limit: %d, want 429", got)
	}
	// Real users log in and use Basic, the table full.
	for _, user := range []string{coordtest.UserReader, coordtest.UserWriter} {
		if got := try(user, coordtest.Password(user)); got != http.StatusOK {
			t.Fatalf("%s logging in with the table full: %d, want 200", user, got)
		}
	}
	if status, raw := s.As(reader).Do(http.MethodGet, base+"/monitoring/session", nil); status != http.StatusOK {
		t.Fatalf("Basic with the table full: %d %s", status, raw)
	}
	// A mistyped password of a real user is a 401, not a lock-out.
	for range 3 {
		if got := try(coordtest.UserReader, "typo"); got != http.StatusUnauthorized {
			t.Fatalf("a real user's typo with the table full: %d, want 401", got)
		}
	}
	if got := try(coordtest.UserReader, coordtest.Password(coordtest.UserReader)); got != http.StatusOK {
		t.Fatalf("the real user after its typos: %d, want 200", got)
	}

	// The address table fills too: failures from two more loopback
	// addresses (three windows with this one's). A real user from a
	// fourth logs in, and its Basic credentials work.
	from := func(ip, user, password string) int {
		t.Helper()
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
			LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}}
		defer client.CloseIdleConnections()
		body, _ := json.Marshal(protocol.LoginRequest{Username: user, Password: password})
		resp, err := client.Post(s.URL+base+"/auth/login", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		if got := from(ip, "u9", "guess"); got != http.StatusUnauthorized {
			t.Fatalf("filling from %s: %d, want 401", ip, got)
		}
	}
	for range 3 {
		if got := from("127.0.0.4", coordtest.UserWriter, "typo"); got != http.StatusUnauthorized {
			t.Fatalf("a typo from a new address with both tables full: %d, want 401", got)
		}
	}
	if got := from("127.0.0.4", coordtest.UserWriter, coordtest.Password(coordtest.UserWriter)); got != http.StatusOK {
		t.Fatalf("a real user from a new address with both tables full: %d, want 200", got)
	}
}
