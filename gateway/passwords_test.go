package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// TestWrongPasswordsFromOneAddressLockOutNoRightOne: behind a proxy every
// client shares one address. 200 wrong-password heartbeats and 200 wrong
// admin passwords from it, past both failure limits (serve's defaults),
// must not refuse the right credentials from the same address: the member
// that was heartbeating, the admin's read, and a login of a user that
// never signed in before (a fresh bcrypt check past the limits).
func TestWrongPasswordsFromOneAddressLockOutNoRightOne(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true, Gateway: gateway.Options{
		LoginFailureLimit: 10, LoginAddressFailureLimit: 50, LoginFailureWindow: 5 * time.Minute,
	}})
	s.CreateStream("orders", 2)
	member := coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember))
	join := strings.Replace(joinBody, "%s", "m1", 1)
	if status, _, raw := send(t, s.URL, http.MethodPost, heartbeatPath("orders", "m1"), join, member); status != http.StatusOK {
		t.Fatalf("the member's heartbeat before the attack: %d %s", status, raw)
	}

	type attempt struct{ method, path, body, authorization string }
	var attempts []attempt
	for range 200 {
		attempts = append(attempts,
			attempt{http.MethodPost, heartbeatPath("orders", "m1"), join, coordtest.Basic(coordtest.UserMember, "wrong")},
			attempt{http.MethodGet, base + "/monitoring/health", "", coordtest.Basic(coordtest.UserAdmin, "wrong")})
	}
	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan attempt)
	for range 100 {
		wg.Go(func() {
			for a := range work {
				status, _, _ := send(t, s.URL, a.method, a.path, a.body, a.authorization)
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}
		})
	}
	for _, a := range attempts {
		work <- a
	}
	close(work)
	wg.Wait()
	if statuses[http.StatusUnauthorized]+statuses[http.StatusTooManyRequests] != len(attempts) || statuses[http.StatusTooManyRequests] == 0 {
		t.Fatalf("wrong passwords answered %v, want only 401 and, past the limits, 429", statuses)
	}

	if status, _, raw := send(t, s.URL, http.MethodPost, heartbeatPath("orders", "m1"), join, member); status != http.StatusOK {
		t.Errorf("the member's heartbeat after the attack: %d %s", status, raw)
	}
	admin := coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	if status, _, raw := send(t, s.URL, http.MethodGet, base+"/monitoring/health", "", admin); status != http.StatusOK {
		t.Errorf("the admin's read after the attack: %d %s", status, raw)
	}
	for _, user := range []string{coordtest.UserAdmin, coordtest.UserReader} {
		body, _ := json.Marshal(protocol.LoginRequest{Username: user, Password: coordtest.Password(user)})
		if status, _, raw := send(t, s.URL, http.MethodPost, base+"/auth/login", string(body), ""); status != http.StatusOK {
			t.Errorf("%s's login after the attack: %d %s", user, status, raw)
		}
	}
}
