package auth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// tokenSource is a test double of the store's API tokens.
type tokenSource struct {
	mu     sync.Mutex
	tokens map[string]APIToken
	fail   error
	reads  int
}

func (s *tokenSource) APIToken(_ context.Context, name string) (APIToken, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.fail != nil {
		return APIToken{}, false, s.fail
	}
	t, ok := s.tokens[name]
	return t, ok, nil
}

func (s *tokenSource) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func TestAPITokens(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	src := &tokenSource{tokens: map[string]APIToken{}}
	a, err := New(Config{Users: []User{user(t, "svc", "pw", Member|Read)}, Secret: secretA, TokenTTL: time.Second,
		Now: clock, APITokens: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	value, hash, err := NewAPIToken("svc-token")
	if err != nil {
		t.Fatal(err)
	}
	if !IsAPIToken(value) || IsAPIToken("rsc1.x.y") || IsAPIToken(value+"x") {
		t.Fatal("IsAPIToken misjudges")
	}
	if _, _, err := NewAPIToken("bad name"); err == nil {
		t.Fatal("a name with a space was accepted")
	}
	src.set(func() { src.tokens["svc-token"] = APIToken{Name: "svc-token", Username: "svc", SecretHash: hash} })

	// Good, a day later: the session token TTL does not bound it.
	now = now.Add(24 * time.Hour)
	p, err := a.VerifyBearer(ctx, value)
	if err != nil || p.Username != "svc" || p.Roles != Member|Read || p.APIToken != "svc-token" || p.Method != MethodBearer {
		t.Fatalf("VerifyBearer = %+v, %v", p, err)
	}
	// Another secret under the same name, a malformed one, an unknown name.
	other, _, _ := NewAPIToken("svc-token")
	unknown, _, _ := NewAPIToken("nobody")
	for _, bad := range []string{other, unknown, value[:len(value)-2], "rsck1.svc-token.", strings.Replace(value, "rsck1.", "rsck2.", 1)} {
		if _, err := a.VerifyBearer(ctx, bad); !errors.Is(err, ErrBadToken) {
			t.Fatalf("VerifyBearer(%q) = %v, want ErrBadToken", bad, err)
		}
	}
	// Reads are cached: the next checks within the bound read nothing.
	src.set(func() { src.reads = 0 })
	for range 10 {
		if _, err := a.VerifyBearer(ctx, value); err != nil {
			t.Fatal(err)
		}
	}
	if src.reads != 0 {
		t.Fatalf("%d store reads within the cache bound, want 0", src.reads)
	}
	// Revoked elsewhere: still good within the bound, refused after it.
	src.set(func() { delete(src.tokens, "svc-token") })
	if _, err := a.VerifyBearer(ctx, value); err != nil {
		t.Fatalf("within the cache bound: %v", err)
	}
	now = now.Add(DefaultAPITokenCacheTTL)
	if _, err := a.VerifyBearer(ctx, value); !errors.Is(err, ErrBadToken) {
		t.Fatalf("after the cache bound: %v, want ErrBadToken", err)
	}
	// Revoked here: refused at once.
	src.set(func() { src.tokens["svc-token"] = APIToken{Name: "svc-token", Username: "svc", SecretHash: hash} })
	a.ForgetAPIToken("svc-token")
	if _, err := a.VerifyBearer(ctx, value); err != nil {
		t.Fatal(err)
	}
	src.set(func() { delete(src.tokens, "svc-token") })
	a.ForgetAPIToken("svc-token")
	if _, err := a.VerifyBearer(ctx, value); !errors.Is(err, ErrBadToken) {
		t.Fatalf("after a revocation here: %v", err)
	}
	// Expiry, and a user no longer configured.
	src.set(func() {
		src.tokens["svc-token"] = APIToken{Name: "svc-token", Username: "svc", SecretHash: hash, ExpiresAt: now.Add(time.Minute)}
	})
	a.ForgetAPIToken("svc-token")
	now = now.Add(time.Minute)
	if _, err := a.VerifyBearer(ctx, value); !errors.Is(err, ErrExpiredToken) {
		t.Fatalf("expired: %v", err)
	}
	src.set(func() { src.tokens["svc-token"] = APIToken{Name: "svc-token", Username: "gone", SecretHash: hash} })
	a.ForgetAPIToken("svc-token")
	if _, err := a.VerifyBearer(ctx, value); !errors.Is(err, ErrBadToken) {
		t.Fatalf("user gone: %v", err)
	}
	// The store failing: what was read less than a minute ago serves,
	// older is refused as unreadable.
	src.set(func() { src.tokens["svc-token"] = APIToken{Name: "svc-token", Username: "svc", SecretHash: hash} })
	a.ForgetAPIToken("svc-token")
	if _, err := a.VerifyBearer(ctx, value); err != nil {
		t.Fatal(err)
	}
	src.set(func() { src.fail = errors.New("store down") })
	now = now.Add(30 * time.Second)
	if _, err := a.VerifyBearer(ctx, value); err != nil {
		t.Fatalf("store down, read 30 s ago: %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := a.VerifyBearer(ctx, value); !errors.Is(err, ErrAPITokenStore) {
		t.Fatalf("store down, read 90 s ago: %v, want ErrAPITokenStore", err)
	}
	// Without a source API tokens are refused; session tokens still work.
	b := newAuth(t, secretA, now, user(t, "svc", "pw", Member))
	if _, err := b.VerifyBearer(ctx, value); !errors.Is(err, ErrBadToken) {
		t.Fatalf("without a source: %v", err)
	}
	tok, err := b.Issue(Principal{Username: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.VerifyBearer(ctx, tok.Value); err != nil {
		t.Fatalf("session token through VerifyBearer: %v", err)
	}
}
