package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// API token format (opaque to clients):
//
//	rsck1.<name>.<base64url(32 random bytes)>
//
// The server keeps only the SHA-256 of the random part, under the token's
// name ([APITokenSource]). The secret has 256 bits of entropy, so a fast
// hash is enough: nobody can guess it from its hash. An API token
// authenticates as its user with that user's current roles; it does not
// expire unless created to, and --token-ttl does not bound it.
const apiTokenPrefix = "rsck1."

// apiTokenSecretBytes is the size of an API token's random part.
const apiTokenSecretBytes = 32

// DefaultAPITokenCacheTTL is how long a replica trusts what it read of an
// API token: a revocation through any replica is honoured by all within it.
const DefaultAPITokenCacheTTL = 2 * time.Second

// apiTokenStaleLimit is how long a token read earlier still serves while
// the store cannot be read: members keep heartbeating through a store
// hiccup, and a revocation waits at most this long for the store.
const apiTokenStaleLimit = time.Minute

// apiTokenCacheMax bounds the API tokens a replica remembers.
const apiTokenCacheMax = 10_000

// APIToken is what the store keeps of an API token.
type APIToken struct {
	Name     string
	Username string
	// SecretHash is the SHA-256 of the token's random part.
	SecretHash []byte
	// ExpiresAt is when the token stops working; zero: never.
	ExpiresAt time.Time
}

// APITokenSource reads stored API tokens: the store shared by every
// replica. found is false when no token has that name.
type APITokenSource interface {
	APIToken(ctx context.Context, name string) (tok APIToken, found bool, err error)
}

// ErrAPITokenStore: the store of API tokens could not be read, and
// nothing read of the token recently enough is at hand.
var ErrAPITokenStore = errors.New("auth: API tokens cannot be read now")

// IsAPIToken reports whether value has the form of an API token (not
// whether it is good).
func IsAPIToken(value string) bool {
	_, _, ok := splitAPIToken(value)
	return ok
}

// NewAPIToken makes the value of a new API token named name, and the
// SHA-256 of its secret, the only part of it the server keeps.
func NewAPIToken(name string) (value string, secretHash []byte, err error) {
	if err := ValidateUsername(name); err != nil {
		return "", nil, fmt.Errorf("API token name: %w", err)
	}
	secret := make([]byte, apiTokenSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return "", nil, fmt.Errorf("API token: %w", err)
	}
	sum := sha256.Sum256(secret)
	return apiTokenPrefix + name + "." + base64.RawURLEncoding.EncodeToString(secret), sum[:], nil
}

// splitAPIToken returns the name and secret of an API token.
func splitAPIToken(value string) (name string, secret []byte, ok bool) {
	rest, ok := strings.CutPrefix(value, apiTokenPrefix)
	if !ok {
		return "", nil, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", nil, false
	}
	name = rest[:i]
	secret, err := base64.RawURLEncoding.Strict().DecodeString(rest[i+1:])
	if err != nil || len(secret) != apiTokenSecretBytes || ValidateUsername(name) != nil {
		return "", nil, false
	}
	return name, secret, true
}

// VerifyBearer checks a bearer token of either kind: a session token from
// login ([Authenticator.VerifyToken]) or an API token, read from the store
// through a cache of at most a few seconds.
func (a *Authenticator) VerifyBearer(ctx context.Context, value string) (Principal, error) {
	if !strings.HasPrefix(value, apiTokenPrefix) {
		return a.VerifyToken(value)
	}
	name, secret, ok := splitAPIToken(value)
	if !ok || a.apiTokens == nil {
		return Principal{}, ErrBadToken
	}
	tok, found, err := a.apiTokens.get(ctx, name, a.now())
	if err != nil {
		return Principal{}, err
	}
	sum := sha256.Sum256(secret)
	if !found || subtle.ConstantTimeCompare(sum[:], tok.SecretHash) != 1 {
		return Principal{}, ErrBadToken
	}
	if !tok.ExpiresAt.IsZero() && !a.now().Before(tok.ExpiresAt) {
		return Principal{}, ErrExpiredToken
	}
	u, ok := a.users[tok.Username]
	if !ok {
		return Principal{}, ErrBadToken
	}
	p := u.principal(MethodBearer)
	p.APIToken = name
	return p, nil
}

// ForgetAPIToken drops what this replica remembers of the API token name,
// so that its revocation (or creation) here takes effect at once; other
// replicas see it within their cache's bound.
func (a *Authenticator) ForgetAPIToken(name string) {
	if a.apiTokens != nil {
		a.apiTokens.forget(name)
	}
}

// HasUser reports whether username is configured, and its roles.
func (a *Authenticator) HasUser(username string) (Roles, bool) {
	u, ok := a.users[username]
	if !ok {
		return 0, false
	}
	return u.principal(MethodBearer).AllRoles(), true
}

// apiTokenCache remembers what was read of API tokens, found or not, for
// ttl; past it a token is read again, and an entry up to
// apiTokenStaleLimit old still serves while the store cannot be read.
type apiTokenCache struct {
	src APITokenSource
	ttl time.Duration

	mu      sync.Mutex
	entries map[string]apiTokenEntry
	// reads makes concurrent reads of one name share one store read.
	reads map[string]*apiTokenRead
}

type apiTokenEntry struct {
	tok   APIToken
	found bool
	read  time.Time
}

type apiTokenRead struct {
	done  chan struct{}
	entry apiTokenEntry
	err   error
}

func newAPITokenCache(src APITokenSource, ttl time.Duration) *apiTokenCache {
	return &apiTokenCache{src: src, ttl: ttl, entries: map[string]apiTokenEntry{}, reads: map[string]*apiTokenRead{}}
}

// apiTokenReadTimeout bounds one store read of an API token.
const apiTokenReadTimeout = 2 * time.Second

func (c *apiTokenCache) get(ctx context.Context, name string, now time.Time) (APIToken, bool, error) {
	c.mu.Lock()
	e, cached := c.entries[name]
	if cached && now.Sub(e.read) < c.ttl {
		c.mu.Unlock()
		return e.tok, e.found, nil
	}
	r, reading := c.reads[name]
	if !reading {
		r = &apiTokenRead{done: make(chan struct{})}
		c.reads[name] = r
		go c.read(name, r, now)
	}
	c.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		return APIToken{}, false, fmt.Errorf("%w: %w", ErrAPITokenStore, ctx.Err())
	}
	if r.err != nil {
		if cached && now.Sub(e.read) < apiTokenStaleLimit {
			return e.tok, e.found, nil
		}
		return APIToken{}, false, fmt.Errorf("%w: %w", ErrAPITokenStore, r.err)
	}
	return r.entry.tok, r.entry.found, nil
}

// read reads name from the store, apart from any one request's context
// (others may wait for the same read), and remembers the answer.
func (c *apiTokenCache) read(name string, r *apiTokenRead, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTokenReadTimeout)
	tok, found, err := c.src.APIToken(ctx, name)
	cancel()
	r.entry, r.err = apiTokenEntry{tok: tok, found: found, read: now}, err
	c.mu.Lock()
	delete(c.reads, name)
	if err == nil {
		if len(c.entries) >= apiTokenCacheMax {
			clear(c.entries)
		}
		c.entries[name] = r.entry
	}
	c.mu.Unlock()
	close(r.done)
}

func (c *apiTokenCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, name)
}
