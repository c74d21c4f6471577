// Package credtest holds the credentials tests and the bench start
// coordinators with, so that they run with authentication on, as by
// default: a users file with one MEMBER user (heartbeats and producer
// routing, nothing else), the bootstrap admin's password, and one token
// secret shared by every replica of a cluster (a token issued by one
// replica is accepted by all, also after a failover).
package credtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// The credentials. They guard nothing but processes on loopback ports of
// one test run.
const (
	// AdminUser and AdminPassword are the bootstrap admin (ADMIN).
	AdminUser     = "admin"
	AdminPassword = "test-admin-pw"
	// MemberUser and MemberPassword sign members, pods and publishers in.
	MemberUser     = "test-members"
	MemberPassword = "test-members-pw"
	// TokenSecret is the RSCOORD_TOKEN_SECRET every replica shares.
	TokenSecret = "one-secret-shared-by-every-replica-of-the-cluster"
)

// Credentials are the users file of a run.
type Credentials struct {
	// UsersFile is the path of the users file (the MEMBER user), for
	// the coordinator's --users.
	UsersFile string
}

// Write writes the users file into dir: the MEMBER user; the admin is the
// bootstrap admin of ServerEnv.
func Write(dir string) (Credentials, error) { return write(dir, false) }

// WriteCluster writes the users file of the replicas of one cluster into
// dir: the MEMBER user and the admin. The admin is in the file because a
// token names the hash of its user's password, and the bootstrap admin's
// is hashed anew by each replica: with the admin in the shared file, an
// admin token issued by one replica is good on every other, also after a
// failover.
func WriteCluster(dir string) (Credentials, error) { return write(dir, true) }

func write(dir string, admin bool) (Credentials, error) {
	type user struct {
		Username     string   `json:"username"`
		PasswordHash string   `json:"passwordHash"`
		Roles        []string `json:"roles"`
	}
	var users []user
	add := func(name, password, role string) error {
		// bcrypt's minimum cost: the runs test coordination, not hashing.
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			return fmt.Errorf("credtest: %w", err)
		}
		users = append(users, user{Username: name, PasswordHash: string(hash), Roles: []string{role}})
		return nil
	}
	if err := add(MemberUser, MemberPassword, "MEMBER"); err != nil {
		return Credentials{}, err
	}
	if admin {
		if err := add(AdminUser, AdminPassword, "ADMIN"); err != nil {
			return Credentials{}, err
		}
	}
	raw, err := json.Marshal(map[string]any{"users": users})
	if err != nil {
		return Credentials{}, fmt.Errorf("credtest: %w", err)
	}
	path := filepath.Join(dir, "users.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return Credentials{}, fmt.Errorf("credtest: %w", err)
	}
	return Credentials{UsersFile: path}, nil
}

// New writes the users file of Write into a new directory of t.
func New(t testing.TB) Credentials {
	t.Helper()
	c, err := Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewCluster writes the users file of WriteCluster into a new directory
// of t.
func NewCluster(t testing.TB) Credentials {
	t.Helper()
	c, err := WriteCluster(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ServerArgs are the coordinator's flags for these credentials.
func (c Credentials) ServerArgs() []string { return []string{"--users", c.UsersFile} }

// ServerEnv is the coordinator's environment: the bootstrap admin's
// password (unused when the users file holds the admin) and the shared
// token secret.
func ServerEnv() []string {
	return []string{"RSCOORD_ADMIN_PASSWORD=" + AdminPassword, "RSCOORD_TOKEN_SECRET=" + TokenSecret}
}

// MemberEnv is the environment that makes a consumer or publisher pod sign
// in as the MEMBER user.
func MemberEnv() []string {
	return []string{"RSCOORD_USER=" + MemberUser, "RSCOORD_PASSWORD=" + MemberPassword}
}

// AdminAuth is the Authorization header value of the bootstrap admin.
func AdminAuth() string { return basic(AdminUser, AdminPassword) }

// MemberAuth is the Authorization header value of the MEMBER user, for
// heartbeats a test or the bench sends itself.
func MemberAuth() string { return basic(MemberUser, MemberPassword) }

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}
