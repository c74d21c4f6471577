package main

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// revocationReach bounds how long a revocation made through one replica
// takes to reach another over etcd's watch: milliseconds on a loopback
// etcd, with room for a loaded test machine.
const revocationReach = 2 * time.Second

// In the cluster mode a token revoked by /auth/logout through any replica
// is refused through that replica at once and through every other one as
// soon as their etcd watch delivers it, and stays refused after each
// failover: revocations live in etcd, loaded by a new owner before it
// serves and followed while it serves.
func TestClusterLogoutRevokesEverywhere(t *testing.T) {
	t.Parallel()
	start := authReplicas(t)
	r1 := start("r1") // the owner
	r2 := start("r2")
	basic := credtest.AdminAuth()
	coordtest.Remote(t, r1.url).As(basic).CreateStream("orders", 2)
	// login gets a token through r, waiting out the 503s of a failover.
	login := func(r *replicaProc) string {
		t.Helper()
		var code int
		var raw []byte
		if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
			code, raw = coordtest.Remote(t, r.url).As(basic).Do(http.MethodPost, protocol.BasePath+"/auth/login", nil)
			if code != http.StatusOK && code != http.StatusServiceUnavailable {
				t.Fatalf("login through %s: %d %s", r.url, code, raw)
			}
			return code == http.StatusOK
		}) {
			t.Fatalf("login through %s: %d %s", r.url, code, raw)
		}
		var tok struct {
			AccessToken string `json:"accessToken"`
		}
		if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" {
			t.Fatalf("login through %s: %s (%v)", r.url, raw, err)
		}
		return "Bearer " + tok.AccessToken
	}
	// status is the answer to a read with token through r, waiting out the
	// 503s of a failover.
	status := func(r *replicaProc, token string) int {
		t.Helper()
		var code int
		var raw []byte
		if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
			code, raw = coordtest.Remote(t, r.url).As(token).Do(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil)
			return code != http.StatusServiceUnavailable
		}) {
			t.Fatalf("%s still 503 after 30 s: %s", r.url, raw)
		}
		return code
	}
	logout := func(r *replicaProc, token string) {
		t.Helper()
		if code, raw := coordtest.Remote(t, r.url).As(token).Do(http.MethodPost, protocol.BasePath+"/auth/logout", nil); code != http.StatusNoContent {
			t.Fatalf("logout through %s: %d %s", r.url, code, raw)
		}
	}
	expect := func(what string, r *replicaProc, token string, want int) {
		t.Helper()
		if got := status(r, token); got != want {
			t.Fatalf("%s through %s: %d, want %d", what, r.url, got, want)
		}
	}

	// reaches waits until the revocation of token, made through another
	// replica, reaches r: it travels by r's etcd watch, so it is refused
	// there a watch event later, not at once.
	reaches := func(r *replicaProc, token string) {
		t.Helper()
		start := time.Now()
		var code int
		if !poll.Wait(revocationReach, 5*time.Millisecond, func() bool {
			code = status(r, token)
			if code != http.StatusOK && code != http.StatusUnauthorized {
				t.Fatalf("the revoked token through %s: %d %v after the logout, want 401 within %v", r.url, code, time.Since(start), revocationReach)
			}
			return code == http.StatusUnauthorized
		}) {
			t.Fatalf("the revoked token through %s: %d %v after the logout, want 401 within %v", r.url, code, time.Since(start), revocationReach)
		}
		t.Logf("the revocation reached %s after %v", r.url, time.Since(start))
	}

	first, second := login(r1), login(r2)
	logout(r2, first) // through the stand-by
	// A read through the stand-by is forwarded to the owner, r1, which
	// checks the token: it is refused there once r1's watch has the
	// revocation (under load, not always by the time of the next read).
	reaches(r2, first)
	reaches(r1, first)
	expect("the other token", r1, second, http.StatusOK)

	// r1 dies: r2 owns, with the revocation made while r1 owned.
	if err := r1.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r1.proc.Wait(10 * time.Second)
	expect("the other token after the failover", r2, second, http.StatusOK)
	expect("the revoked token after the failover", r2, first, http.StatusUnauthorized)

	// A revocation on the new owner, then back to r1 (restarted).
	logout(r2, second)
	expect("the token revoked on the new owner", r2, second, http.StatusUnauthorized)
	r1 = start("r1")
	if err := r2.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r2.proc.Wait(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM of r2: %v\n%s", err, r2.proc.Output())
	}
	expect("a fresh token after the second failover", r1, login(r1), http.StatusOK)
	expect("the first revoked token after the second failover", r1, first, http.StatusUnauthorized)
	expect("the second revoked token after the second failover", r1, second, http.StatusUnauthorized)
	if err := r1.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r1.proc.Wait(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM of r1: %v\n%s", err, r1.proc.Output())
	}
}
