package gateway_test

import (
	"encoding/json"
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
