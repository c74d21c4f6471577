package credtest

import (
	"encoding/base64"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/gateway/auth"
)

// The users files load as the coordinator loads them, with the passwords
// the tests and the bench sign in with, and the admin only in the
// cluster's.
func TestUsersFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		creds Credentials
		want  map[string]string // user → its password
	}{
		{"one server", New(t), map[string]string{MemberUser: MemberPassword}},
		{"a cluster", NewCluster(t), map[string]string{MemberUser: MemberPassword, AdminUser: AdminPassword}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			users, err := auth.LoadUsersFile(tc.creds.UsersFile)
			if err != nil {
				t.Fatal(err)
			}
			if len(users) != len(tc.want) {
				t.Fatalf("%d users, want %d", len(users), len(tc.want))
			}
			for _, u := range users {
				password, ok := tc.want[u.Username]
				if !ok || bcrypt.CompareHashAndPassword(u.PasswordHash, []byte(password)) != nil {
					t.Errorf("user %q does not sign in with its password", u.Username)
				}
			}
		})
	}
	for header, user := range map[string]string{AdminAuth(): AdminUser + ":" + AdminPassword, MemberAuth(): MemberUser + ":" + MemberPassword} {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(header, "Basic "))
		if err != nil || string(raw) != user {
			t.Errorf("Authorization %q is not Basic %s", header, user)
		}
	}
}
