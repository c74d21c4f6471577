package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/coordtest"
)

// Credentials of the end-to-end runs: the coordinator runs with
// authentication on, as by default; the pods and publishers sign in as a
// MEMBER (heartbeats and producer routing, nothing else) and the tests
// administer as the bootstrap admin.
const (
	e2eMemberUser     = "e2e-pods"
	e2eMemberPassword = "e2e-pods-pw"
	e2eAdminPassword  = "e2e-admin-pw"
)

// memberEnv is the environment that makes a consumer or publisher pod
// sign in as the MEMBER user.
func memberEnv() []string {
	return []string{"RSCOORD_USER=" + e2eMemberUser, "RSCOORD_PASSWORD=" + e2eMemberPassword}
}

// adminEnv is the coordinator's environment: its bootstrap admin's
// password.
func adminEnv() []string { return []string{"RSCOORD_ADMIN_PASSWORD=" + e2eAdminPassword} }

// remote is a handle on the coordinator at url that administers as the
// bootstrap admin.
func remote(t testing.TB, url string) *coordtest.Server {
	return coordtest.Remote(t, url).As(coordtest.Basic("admin", e2eAdminPassword))
}

// memberAuth is the Authorization of the MEMBER user, for heartbeats a
// test sends itself.
func memberAuth() string { return coordtest.Basic(e2eMemberUser, e2eMemberPassword) }

// usersFile writes the users file of the MEMBER user into a new directory
// of t and returns its path, for the coordinator's --users.
func usersFile(t testing.TB) string {
	t.Helper()
	// bcrypt's minimum cost: the runs test ownership, not hashing.
	hash, err := bcrypt.GenerateFromPassword([]byte(e2eMemberPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{"users": []map[string]any{
		{"username": e2eMemberUser, "passwordHash": string(hash), "roles": []string{"MEMBER"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
