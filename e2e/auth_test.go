package e2e

import (
	"testing"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
)

// Credentials of the end-to-end runs (internal/credtest, shared with the
// coordinator's own cluster tests and the bench): the coordinator runs
// with authentication on, as by default; the pods and publishers sign in
// as a MEMBER (heartbeats and producer routing, nothing else) and the
// tests administer as the bootstrap admin.
const (
	e2eMemberUser     = credtest.MemberUser
	e2eMemberPassword = credtest.MemberPassword
	e2eAdminPassword  = credtest.AdminPassword
)

// memberEnv is the environment that makes a consumer or publisher pod
// sign in as the MEMBER user.
func memberEnv() []string { return credtest.MemberEnv() }

// adminEnv is the coordinator's environment: its bootstrap admin's
// password and the token secret every replica of a cluster shares.
func adminEnv() []string { return credtest.ServerEnv() }

// remote is a handle on the coordinator at url that administers as the
// bootstrap admin.
func remote(t testing.TB, url string) *coordtest.Server {
	return coordtest.Remote(t, url).As(credtest.AdminAuth())
}

// memberAuth is the Authorization of the MEMBER user, for heartbeats a
// test sends itself.
func memberAuth() string { return credtest.MemberAuth() }

// usersFile writes the users file of the MEMBER user into a new directory
// of t and returns its path, for the coordinator's --users.
func usersFile(t testing.TB) string { return credtest.New(t).UsersFile }
