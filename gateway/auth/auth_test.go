package auth

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func user(t *testing.T, name, password string, roles Roles) User {
	t.Helper()
	h, err := HashPassword(password, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return User{Username: name, PasswordHash: h, Roles: roles}
}

func newAuth(t *testing.T, secret []byte, now time.Time, users ...User) *Authenticator {
	t.Helper()
	a, err := New(Config{Users: users, Secret: secret, TokenTTL: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var secretA, secretB = bytes.Repeat([]byte("a"), 32), bytes.Repeat([]byte("b"), 32)

func TestPasswords(t *testing.T) {
	a := newAuth(t, secretA, time.Now(), user(t, "ops", "pw", Write|Read))
	for _, tc := range []struct {
		user, password string
		ok             bool
	}{
		{"ops", "pw", true}, {"ops", "pw", true}, // the second from the cache
		{"ops", "PW", false}, {"ops", "", false}, {"nobody", "pw", false}, {"", "", false},
	} {
		p, err := a.CheckPassword(context.Background(), tc.user, tc.password)
		if (err == nil) != tc.ok {
			t.Fatalf("%s/%s: %v", tc.user, tc.password, err)
		}
		if tc.ok && (p.Username != "ops" || p.Roles != Write|Read || p.Method != MethodBasic) {
			t.Fatalf("principal %+v", p)
		}
	}
}

func TestTokens(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	ops := user(t, "ops", "pw", Write|Member)
	a := newAuth(t, secretA, now, ops)
	tok, err := a.Issue(Principal{Username: "ops", Roles: Write | Member})
	if err != nil {
		t.Fatal(err)
	}
	if !tok.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("expires %v", tok.ExpiresAt)
	}
	p, err := a.VerifyToken(tok.Value)
	if err != nil || p.Username != "ops" || p.Roles != Write|Member || p.Method != MethodBearer {
		t.Fatalf("verify: %+v %v", p, err)
	}
	// Tampering anywhere breaks it.
	for i := range tok.Value {
		bad := []byte(tok.Value)
		bad[i] ^= 1
		if _, err := a.VerifyToken(string(bad)); err == nil {
			t.Fatalf("token with byte %d flipped verified", i)
		}
	}
	for _, bad := range []string{"", "rsc1.", "rsc1..", "x.y.z", strings.TrimPrefix(tok.Value, "rsc1.")} {
		if _, err := a.VerifyToken(bad); err != ErrBadToken {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if _, err := newAuth(t, secretB, now, ops).VerifyToken(tok.Value); err != ErrBadToken {
		t.Fatalf("other secret: %v", err)
	}
	if _, err := newAuth(t, secretA, now.Add(time.Hour), ops).VerifyToken(tok.Value); err != ErrExpiredToken {
		t.Fatalf("at expiry: %v", err)
	}
	// A token is cut to its user's current roles, and dies with the user
	// or its password.
	p, err = newAuth(t, secretA, now, User{Username: "ops", PasswordHash: ops.PasswordHash, Roles: Member | Read}).VerifyToken(tok.Value)
	if err != nil || p.Roles != Member {
		t.Fatalf("roles after the user lost WRITE: %v %v", p.Roles.Names(), err)
	}
	if _, err := newAuth(t, secretA, now, user(t, "other", "pw", Admin)).VerifyToken(tok.Value); err != ErrBadToken {
		t.Fatalf("token of a removed user: %v", err)
	}
	for _, pw := range []string{"new-pw", "pw"} { // a new hash, even of the same password, is a new credential
		if _, err := newAuth(t, secretA, now, user(t, "ops", pw, Write|Member)).VerifyToken(tok.Value); err != ErrRevokedToken {
			t.Fatalf("token after a password change to %q: %v", pw, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	u := user(t, "ops", "pw", Read)
	for name, cfg := range map[string]Config{
		"short secret": {Secret: []byte("short"), Users: []User{u}},
		"duplicate":    {Secret: secretA, Users: []User{u, u}},
		"bad name":     {Secret: secretA, Users: []User{{Username: "a:b", PasswordHash: u.PasswordHash}}},
		"not bcrypt":   {Secret: secretA, Users: []User{{Username: "x", PasswordHash: []byte("plain")}}},
		"negative ttl": {Secret: secretA, TokenTTL: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseUsers(t *testing.T) {
	h, _ := HashPassword("pw", bcrypt.MinCost)
	good := `{"users":[{"username":"ops","passwordHash":"` + string(h) + `","roles":["WRITE","MEMBER"]}]}`
	users, err := ParseUsers([]byte(good))
	if err != nil || len(users) != 1 || users[0].Roles != Write|Member {
		t.Fatalf("%+v %v", users, err)
	}
	for name, raw := range map[string]string{
		"unknown field": `{"users":[{"username":"ops","password":"pw","roles":["READ"]}]}`,
		"no hash":       `{"users":[{"username":"ops","passwordHash":"pw","roles":["READ"]}]}`,
		"unknown role":  strings.Replace(good, "MEMBER", "ROOT", 1),
		"no roles":      strings.Replace(good, `"WRITE","MEMBER"`, "", 1),
		"bad name":      strings.Replace(good, `"ops"`, `"a b"`, 1),
		"twice":         `{"users":[` + good[10:len(good)-2] + `,` + good[10:len(good)-2] + `]}`,
		"trailing":      good + "x",
		"not json":      `users: []`,
	} {
		_, err := ParseUsers([]byte(raw))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), string(h)) {
			t.Errorf("%s: the error shows the hash: %v", name, err)
		}
	}
}

// TestBootstrapAdmin: a first start generates a password into a 0600 file
// it names and keeps its hash; a later start generates nothing; a chosen
// password wins, is not stored, and is refused when short.
func TestBootstrapAdmin(t *testing.T) {
	dir := t.TempDir()
	u, generated, err := BootstrapAdmin(dir, "", secretA, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if generated != filepath.Join(dir, AdminPasswordFile) || u.Username != AdminUsername || u.Roles != Admin {
		t.Fatalf("generated %q, user %+v", generated, u)
	}
	raw, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	password := strings.TrimSpace(string(raw))
	if len(password) != 24 { // 18 random bytes, base64url
		t.Fatalf("generated password %q", password)
	}
	if bcrypt.CompareHashAndPassword(u.PasswordHash, []byte(password)) != nil {
		t.Fatal("the generated password does not match")
	}
	path := filepath.Join(dir, AdminHashFile)
	stored, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), password) || bcrypt.CompareHashAndPassword(bytes.TrimSpace(stored), []byte(password)) != nil {
		t.Fatalf("stored file %q must hold the hash only", stored)
	}
	for _, p := range []string{path, generated} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v", p, fi.Mode())
		}
	}
	// Second start, after the operator deleted the password file: nothing
	// generated, same hash.
	if err := os.Remove(generated); err != nil {
		t.Fatal(err)
	}
	again, generated, err := BootstrapAdmin(dir, "", secretA, bcrypt.MinCost)
	if err != nil || generated != "" || bcrypt.CompareHashAndPassword(again.PasswordHash, []byte(password)) != nil {
		t.Fatalf("second start: generated %q, err %v", generated, err)
	}
	// RSCOORD_ADMIN_PASSWORD wins and is not stored.
	fromEnv, generated, err := BootstrapAdmin(dir, "chosen-password", secretA, bcrypt.MinCost)
	if err != nil || generated != "" || bcrypt.CompareHashAndPassword(fromEnv.PasswordHash, []byte("chosen-password")) != nil {
		t.Fatalf("from env: %v, generated %q", err, generated)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, stored) {
		t.Fatal("the env password changed the stored hash")
	}
	for _, short := range []string{"x", "8charsss", "elevenchars"} {
		if _, _, err := BootstrapAdmin(dir, short, secretA, bcrypt.MinCost); err == nil || !strings.Contains(err.Error(), "at least 12") {
			t.Errorf("RSCOORD_ADMIN_PASSWORD %q: %v, want a refusal naming 12", short, err)
		}
	}
}

// TestUsersFileWritableByOthersIsRefused: a users file its group or others
// may write grants roles to whoever writes it, so it is refused.
func TestUsersFileWritableByOthersIsRefused(t *testing.T) {
	hash, err := HashPassword("reader-password", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"users":[{"username":"reader","passwordHash":"` + string(hash) + `","roles":["READ"]}]}`
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o644, true}, {0o664, false}, {0o666, false}, {0o602, false}} {
		path := filepath.Join(t.TempDir(), "users.json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadUsersFile(path)
		if (err == nil) != tc.ok {
			t.Errorf("mode %v: %v, want ok %v", tc.mode, err, tc.ok)
		}
	}
}

// TestBootstrapAdminTokensOutliveRestarts issues a token to the admin of
// RSCOORD_ADMIN_PASSWORD and checks it with the admin of a later start (or
// of another replica): the password is hashed afresh each time, and the
// token stays good until the password or the token secret changes.
func TestBootstrapAdminTokensOutliveRestarts(t *testing.T) {
	now := time.Now()
	first, _, err := BootstrapAdmin(t.TempDir(), "chosen-password", secretA, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	token, err := newAuth(t, secretA, now, first).Issue(first.principal(MethodBasic))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		password string
		secret   []byte
		want     error
	}{
		{"same password, same secret", "chosen-password", secretA, nil},
		{"password changed", "changed-password", secretA, ErrRevokedToken},
		{"secret changed", "chosen-password", secretB, ErrRevokedToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			later, _, err := BootstrapAdmin(t.TempDir(), tc.password, tc.secret, bcrypt.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(later.PasswordHash, first.PasswordHash) {
				t.Fatal("the password was not hashed afresh: the test proves nothing")
			}
			cfg := Config{Users: []User{later}, Secret: tc.secret, TokenTTL: time.Hour, Now: func() time.Time { return now }}
			if !bytes.Equal(tc.secret, secretA) {
				cfg.PreviousSecrets = [][]byte{secretA} // the token's signature still verifies
			}
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.VerifyToken(token.Value)
			if !errors.Is(err, tc.want) {
				t.Fatalf("VerifyToken = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	s1, err := LoadOrCreateSecret(dir, "")
	if err != nil || len(s1) != 32 {
		t.Fatalf("%d bytes, %v", len(s1), err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, SecretFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	s2, err := LoadOrCreateSecret(dir, "")
	if err != nil || !bytes.Equal(s1, s2) {
		t.Fatal("the secret changed across starts")
	}
	env := strings.Repeat("e", 40)
	if s, err := LoadOrCreateSecret(dir, env); err != nil || string(s) != env {
		t.Fatalf("env secret: %v", err)
	}
	if _, err := LoadOrCreateSecret(dir, "short"); err == nil {
		t.Fatal("a short env secret was accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, SecretFile), []byte("zz"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateSecret(dir, ""); err == nil {
		t.Fatal("a damaged secret file was accepted")
	}
}

func TestPermissions(t *testing.T) {
	for _, tc := range []struct {
		perm    Permission
		allowed []Roles
	}{
		{PermRead, []Roles{Read, Monitor, Write, Admin}},
		{PermWrite, []Roles{Write, Admin}},
		{PermRouting, []Roles{Read, Monitor, Write, Member, Admin}},
		{PermMember, []Roles{Member, Admin}},
	} {
		for _, r := range []Roles{Read, Write, Member, Admin, Monitor} {
			want := false
			for _, a := range tc.allowed {
				want = want || a == r
			}
			if r.Allows(tc.perm) != want {
				t.Errorf("%v allows %v: %v, want %v", r.Names(), tc.perm, !want, want)
			}
		}
	}
}

// A token verified once is remembered, but its expiry and revocation
// still apply at once to later uses.
func TestRememberedTokens(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := now
	revocations, err := OpenRevocations(t.TempDir(), 0, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Users: []User{user(t, "ops", "pw", Member)}, Secret: secretA, TokenTTL: time.Hour,
		Revocations: revocations, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	issue := func() string {
		t.Helper()
		tok, err := a.Issue(Principal{Username: "ops", Roles: Member})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Value
	}
	verify := func(tok string, want error) {
		t.Helper()
		if _, err := a.VerifyToken(tok); err != want {
			t.Fatalf("verify: %v, want %v", err, want)
		}
	}

	expiring, revoked := issue(), issue()
	verify(expiring, nil)
	verify(expiring, nil) // remembered
	verify(revoked, nil)
	if err := a.Revoke(revoked); err != nil {
		t.Fatal(err)
	}
	verify(revoked, ErrRevokedToken)
	clock = now.Add(time.Hour)
	verify(expiring, ErrExpiredToken)

	// Bounded: past its size the cache forgets, and still verifies.
	c := newTokenCache(2)
	for i, tok := range []string{"a", "b", "c"} {
		c.put(tok, claims{Exp: now.Unix() + int64(i) + 1}, now)
	}
	if len(c.entries) > 2 {
		t.Fatalf("%d tokens remembered, want at most 2", len(c.entries))
	}
	if _, ok := c.get("c"); !ok {
		t.Fatal("the last token put is forgotten")
	}
}
