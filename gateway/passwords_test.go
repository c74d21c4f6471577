package gateway_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
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

// A password check that cannot get a bcrypt place within the server's
// PasswordWait is answered 429 with Retry-After at once, rather than wait
// for the checks ahead of it: a slow enough machine must not let a login
// outlast the write deadline of an unauthenticated answer.
func TestPasswordCheckWaitsNoLongerThanItsBound(t *testing.T) {
	t.Parallel()
	// A bcrypt comparison well past the bound (-race slows bcrypt about
	// fifteen times).
	slowCost := 13
	if raceEnabled {
		slowCost = 10
	}
	const wait = 150 * time.Millisecond
	hash, err := auth.HashPassword("slow-password", slowCost)
	if err != nil {
		t.Fatal(err)
	}
	users := append(coordtest.TestUsers(t), auth.User{Username: "slow", PasswordHash: hash, Roles: auth.Read})
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{Users: users}, Gateway: gateway.Options{
		PasswordWait: wait, LoginFailureLimit: 1000, LoginAddressFailureLimit: 1000, LoginFailureWindow: time.Minute,
	}})
	health := base + "/monitoring/health"

	// Wrong passwords of the slow user take every bcrypt place for a
	// while.
	places := runtime.GOMAXPROCS(0)
	slowDone := make(chan int, places)
	for range places {
		go func() {
			status, _, _ := send(t, s.URL, http.MethodGet, health, "", coordtest.Basic("slow", "wrong-password"))
			slowDone <- status
		}()
	}
	// Probes with wrong passwords of a fast user: checked at once (401)
	// while a place is free, refused (429) once the slow checks hold them.
	probe := coordtest.Basic(coordtest.UserReader, "wrong")
	for {
		start := time.Now()
		status, hdr, raw := send(t, s.URL, http.MethodGet, health, "", probe)
		took := time.Since(start)
		if status == http.StatusUnauthorized {
			select {
			case st := <-slowDone:
				t.Fatalf("a probe was checked only after a slow check ended (%d): it waited past its bound", st)
			default:
				continue
			}
		}
		if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Fatalf("a probe behind the slow checks: %d (Retry-After %q) %s, want 429 with Retry-After", status, hdr.Get("Retry-After"), raw)
		}
		if took < wait {
			t.Fatalf("the probe was refused after %v, before its wait of %v", took, wait)
		}
		select {
		case st := <-slowDone:
			t.Fatalf("the probe's 429 came after a slow check ended (%d): it waited for the checks ahead", st)
		default:
		}
		break
	}
	for range places {
		if st := <-slowDone; st != http.StatusUnauthorized {
			t.Errorf("a slow check with a wrong password: %d, want 401", st)
		}
	}
}
