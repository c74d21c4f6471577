package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"runtime"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// ErrBadCredentials: unknown user or wrong password. Clients are not told
// which.
var ErrBadCredentials = errors.New("auth: bad credentials")

// Config configures an [Authenticator].
type Config struct {
	// Users are every configured user (users file and bootstrap admin);
	// names must be unique.
	Users []User
	// Secret signs tokens; at least [MinSecretBytes] bytes. Required.
	Secret []byte
	// PreviousSecrets still verify tokens (never sign new ones), so that
	// Secret can be rotated without logging everyone out: move the old
	// secret here, and drop it once its tokens have expired.
	PreviousSecrets [][]byte
	// Revocations remembers tokens revoked by logout. Nil: logout is
	// refused with [ErrNoRevocations].
	Revocations *Revocations
	// APITokens reads the stored API tokens; nil: API tokens are refused.
	APITokens APITokenSource
	// APITokenCacheTTL bounds how long what was read of an API token is
	// trusted. Default [DefaultAPITokenCacheTTL].
	APITokenCacheTTL time.Duration
	// TokenTTL is the lifetime of issued tokens. Default [DefaultTokenTTL].
	TokenTTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Authenticator checks passwords and tokens. It is safe for concurrent
// use.
type Authenticator struct {
	users map[string]User
	// secrets verify tokens; the first signs them.
	secrets [][]byte
	revoked *Revocations
	ttl     time.Duration
	now     func() time.Time
	// dummy is a bcrypt hash compared against for unknown users, so that
	// their check costs what a known user's does.
	dummy []byte
	cache *verifiedCache
	// tokens remembers tokens whose signature checked out.
	tokens *tokenCache
	// apiTokens reads API tokens; nil without a source.
	apiTokens *apiTokenCache
	// checks holds one place per bcrypt comparison running: comparisons
	// cost CPU, and however many requests bring passwords at once, at
	// most this many compare them while heartbeats need the rest.
	checks chan struct{}
}

// New checks cfg and returns an Authenticator.
func New(cfg Config) (*Authenticator, error) {
	if len(cfg.Secret) < MinSecretBytes {
		return nil, fmt.Errorf("auth: token secret must be at least %d bytes", MinSecretBytes)
	}
	if cfg.TokenTTL < 0 {
		return nil, fmt.Errorf("auth: token TTL %v is negative", cfg.TokenTTL)
	}
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Authenticator{users: map[string]User{}, secrets: [][]byte{append([]byte(nil), cfg.Secret...)},
		revoked: cfg.Revocations, ttl: cfg.TokenTTL, now: cfg.Now,
		checks: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))}
	for i, old := range cfg.PreviousSecrets {
		if len(old) < MinSecretBytes {
			return nil, fmt.Errorf("auth: previous token secret %d must be at least %d bytes", i+1, MinSecretBytes)
		}
		a.secrets = append(a.secrets, append([]byte(nil), old...))
	}
	cost := bcrypt.DefaultCost
	for _, u := range cfg.Users {
		if _, dup := a.users[u.Username]; dup {
			return nil, fmt.Errorf("auth: user %q is configured twice", u.Username)
		}
		if err := ValidateUsername(u.Username); err != nil {
			return nil, fmt.Errorf("auth: user %q: %w", u.Username, err)
		}
		c, err := bcrypt.Cost(u.PasswordHash)
		if err != nil {
			return nil, fmt.Errorf("auth: user %q: password hash is not bcrypt", u.Username)
		}
		cost = c
		a.users[u.Username] = u
	}
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	dummy, err := bcrypt.GenerateFromPassword(random[:24], cost)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	a.dummy = dummy
	a.cache = newVerifiedCache(random, 5*time.Minute, 10_000)
	a.tokens = newTokenCache(10_000)
	if cfg.APITokens != nil {
		if cfg.APITokenCacheTTL <= 0 {
			cfg.APITokenCacheTTL = DefaultAPITokenCacheTTL
		}
		a.apiTokens = newAPITokenCache(cfg.APITokens, cfg.APITokenCacheTTL)
	}
	return a, nil
}

// Close releases the revocations file. A nil Authenticator closes nothing.
func (a *Authenticator) Close() error {
	if a == nil {
		return nil
	}
	return a.revoked.Close()
}

// TokenTTL is the lifetime of issued tokens.
func (a *Authenticator) TokenTTL() time.Duration { return a.ttl }

// CheckPassword returns the principal of username if password is right,
// else [ErrBadCredentials]. A successful check is remembered (keyed by an
// HMAC of the credentials under a per-process key) for a few minutes, so
// that clients sending Basic on every call (the JVM starter) cost one
// bcrypt comparison, not one per request. A comparison waits for one of
// the server's places for them; when ctx ends first, the error wraps
// ctx's.
func (a *Authenticator) CheckPassword(ctx context.Context, username, password string) (Principal, error) {
	if p, ok := a.Verified(username, password); ok {
		return p, nil
	}
	u, known := a.users[username]
	hash := a.dummy
	if known {
		hash = u.PasswordHash
	}
	select {
	case a.checks <- struct{}{}:
	case <-ctx.Done():
		return Principal{}, fmt.Errorf("auth: wait to check a password: %w", ctx.Err())
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	<-a.checks
	if err != nil || !known {
		return Principal{}, ErrBadCredentials
	}
	a.cache.remember(username, password, a.now())
	return u.principal(MethodBasic), nil
}

// Verified returns the principal of username when these credentials
// checked out a short while ago, without comparing them again. It costs
// no bcrypt work, so callers may ask it before any limit.
func (a *Authenticator) Verified(username, password string) (Principal, bool) {
	p, _, ok := a.VerifiedUntil(username, password)
	return p, ok
}

// VerifiedUntil is Verified, with the time until which the check it
// remembers holds: a caller may trust the same credentials until then
// without asking again.
func (a *Authenticator) VerifiedUntil(username, password string) (Principal, time.Time, bool) {
	u, known := a.users[username]
	if !known {
		return Principal{}, time.Time{}, false
	}
	if until, ok := a.cache.hit(username, password, a.now()); ok {
		return u.principal(MethodBasic), until, true
	}
	return Principal{}, time.Time{}, false
}

// Now is the authenticator's clock, which the times it answers are on.
func (a *Authenticator) Now() time.Time { return a.now() }

// verifiedCache remembers credentials recently verified.
type verifiedCache struct {
	key     []byte
	ttl     time.Duration
	maxSize int

	// macs holds *macScratch, an HMAC under key (reset) with room for
	// its input, for id: clients sending Basic on every call check it on
	// every request, a new HMAC is two digests and their pads, and the
	// input and sum built afresh would be garbage per request.
	macs sync.Pool

	mu      sync.Mutex
	entries map[[sha256.Size]byte]time.Time
}

// maxScratchInput is the largest input buffer a macScratch keeps.
const maxScratchInput = 1 << 10

// macScratch is one HMAC of verifiedCache.id and its reused buffers.
type macScratch struct {
	mac hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

func newVerifiedCache(key []byte, ttl time.Duration, maxSize int) *verifiedCache {
	c := &verifiedCache{key: key, ttl: ttl, maxSize: maxSize, entries: map[[sha256.Size]byte]time.Time{}}
	c.macs.New = func() any { return &macScratch{mac: hmac.New(sha256.New, key)} }
	return c
}

// id is the HMAC of username, a zero byte and password: what the cache
// keeps instead of the password.
func (c *verifiedCache) id(username, password string) [sha256.Size]byte {
	m := c.macs.Get().(*macScratch)
	m.in = append(append(append(m.in[:0], username...), 0), password...)
	m.mac.Write(m.in)
	out := [sha256.Size]byte(m.mac.Sum(m.sum[:0]))
	clear(m.in) // no password left behind in the pool
	if cap(m.in) > maxScratchInput {
		m.in = nil // a huge header's buffer is not kept
	}
	m.mac.Reset()
	c.macs.Put(m)
	return out
}

// hit reports whether these credentials were verified and the check still
// holds at now, and until when it holds.
func (c *verifiedCache) hit(username, password string, now time.Time) (time.Time, bool) {
	id := c.id(username, password)
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.entries[id]
	return exp, ok && now.Before(exp)
}

func (c *verifiedCache) remember(username, password string, now time.Time) {
	id := c.id(username, password)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.maxSize {
		for k, exp := range c.entries {
			if !now.Before(exp) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.maxSize {
			clear(c.entries)
		}
	}
	c.entries[id] = now.Add(c.ttl)
}
