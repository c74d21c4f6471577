package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

// sharedStore is a SharedRevocations in memory that can fail.
type sharedStore struct {
	put map[string]time.Time
	err error
}

func (s *sharedStore) Put(_ context.Context, id string, exp time.Time) error {
	if s.err != nil {
		return s.err
	}
	s.put[id] = exp
	return nil
}

// Shared revocations: Revoke stores in the shared store before the token
// counts as revoked (and not at all when the store fails); Remember takes
// what other replicas stored, ignoring expired ones; an authenticator over
// them refuses a token revoked by either way.
func TestSharedRevocations(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := &sharedStore{put: map[string]time.Time{}}
	r := OpenSharedRevocations(store, 3, clock)
	exp := now.Add(time.Hour)

	if err := r.Revoke("a", exp); err != nil || !r.Revoked("a") || !store.put["a"].Equal(exp) {
		t.Fatalf("revoke a: %v, revoked %v, stored %v", err, r.Revoked("a"), store.put)
	}
	store.err = errors.New("etcd unreachable")
	if err := r.Revoke("b", exp); err == nil || r.Revoked("b") {
		t.Fatalf("revoke b with the store down: %v, revoked %v", err, r.Revoked("b"))
	}
	store.err = nil
	for _, tc := range []struct {
		id      string
		exp     time.Time
		revoked bool
	}{
		{"from-r2", exp, true},
		{"expired", now.Add(-time.Second), false},
		{"at-expiry", now, false},
	} {
		r.Remember(tc.id, tc.exp)
		if r.Revoked(tc.id) != tc.revoked {
			t.Errorf("remembered %s (exp %v): revoked %v, want %v", tc.id, tc.exp, r.Revoked(tc.id), tc.revoked)
		}
	}
	// Full of unexpired ids: Revoke refuses, Remember still records (the
	// revocation holds elsewhere already).
	r.Remember("c", exp)
	if err := r.Revoke("d", exp); !errors.Is(err, ErrTooManyRevocations) {
		t.Fatalf("revoke past the bound: %v", err)
	}
	r.Remember("e", exp)
	if !r.Revoked("e") {
		t.Fatal("a revocation from another replica was dropped at the bound")
	}

	ops := user(t, "ops", "pw", Read)
	a, err := New(Config{Users: []User{ops}, Secret: secretA, TokenTTL: time.Hour, Now: clock,
		Revocations: OpenSharedRevocations(store, 0, clock)})
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := a.Issue(Principal{Username: "ops", Roles: Read})
	theirs, _ := a.Issue(Principal{Username: "ops", Roles: Read})
	if err := a.Revoke(mine.Value); err != nil {
		t.Fatal(err)
	}
	c, err := a.claims(theirs.Value)
	if err != nil {
		t.Fatal(err)
	}
	a.revoked.Remember(c.Jti, time.Unix(c.Exp, 0))
	for name, tok := range map[string]Token{"revoked here": mine, "revoked by another replica": theirs} {
		if _, err := a.VerifyToken(tok.Value); !errors.Is(err, ErrRevokedToken) {
			t.Errorf("token %s: %v", name, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
