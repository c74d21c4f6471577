package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Token format (opaque to clients):
//
//	rsc1.<base64url(claims JSON)>.<base64url(HMAC-SHA256(secret, "rsc1." + base64url(claims)))>
//
// claims = {"sub": username, "roles": [...], "iat": unix, "exp": unix, "jti": random,
// "cred": fingerprint}. The version prefix is signed too, so a token cannot
// be replayed as another format. "cred" names the credential the token was
// issued for (a hash of the user's bcrypt hash, see [credentialFingerprint]):
// a changed password or a removed user makes every older token invalid.
const tokenPrefix = "rsc1."

// DefaultTokenTTL is how long a token lives unless configured: 7 days,
// because the reference Python client logs in once and never again.
const DefaultTokenTTL = 7 * 24 * time.Hour

// MinSecretBytes is the shortest token secret accepted.
const MinSecretBytes = 32

// Token errors. Both mean 401 to the gateway; neither says more to clients.
var (
	// ErrBadToken: not a token of this server (malformed, signed with
	// another secret, or of a user no longer configured).
	ErrBadToken = errors.New("auth: invalid token")
	// ErrExpiredToken: a valid token past its expiry.
	ErrExpiredToken = errors.New("auth: token expired")
	// ErrRevokedToken: a token revoked by logout, or issued for a
	// password that has changed since.
	ErrRevokedToken = errors.New("auth: token revoked")
)

type claims struct {
	Sub   string   `json:"sub"`
	Roles []string `json:"roles"`
	Iat   int64    `json:"iat"`
	Exp   int64    `json:"exp"`
	Jti   string   `json:"jti"`
	Cred  string   `json:"cred"`
}

// Token is an issued access token.
type Token struct {
	// Value is the bearer token.
	Value     string
	ExpiresAt time.Time
}

func sign(secret []byte, msg string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

// credentialFingerprint names a user's credential without revealing it:
// SHA-256 of the bcrypt hash (itself salted), or of [User.Credential]
// when set, cut to 96 bits.
func credentialFingerprint(u User) string {
	credential := u.PasswordHash
	if u.Credential != nil {
		credential = u.Credential
	}
	sum := sha256.Sum256(append([]byte("rscoord-credential\x00"+u.Username+"\x00"), credential...))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// Issue signs a token for p that expires after the configured TTL.
func (a *Authenticator) Issue(p Principal) (Token, error) {
	now := a.now().UTC()
	exp := now.Add(a.ttl).Truncate(time.Second)
	jti := make([]byte, 12)
	if _, err := rand.Read(jti); err != nil {
		return Token{}, fmt.Errorf("issue token: %w", err)
	}
	u, ok := a.users[p.Username]
	if !ok {
		return Token{}, fmt.Errorf("issue token: %w", ErrBadCredentials)
	}
	body, err := json.Marshal(claims{
		Sub: p.Username, Roles: p.AllRoles().Names(), Iat: now.Unix(), Exp: exp.Unix(),
		Jti: base64.RawURLEncoding.EncodeToString(jti), Cred: credentialFingerprint(u),
	})
	if err != nil {
		return Token{}, fmt.Errorf("issue token: %w", err)
	}
	signed := tokenPrefix + base64.RawURLEncoding.EncodeToString(body)
	return Token{Value: signed + "." + base64.RawURLEncoding.EncodeToString(sign(a.secrets[0], signed)), ExpiresAt: exp}, nil
}

// VerifyToken checks value's signature (under the current or a previous
// secret), expiry, credential and revocation, and returns its principal,
// whose roles are those of the token that the user still has.
func (a *Authenticator) VerifyToken(value string) (Principal, error) {
	c, err := a.claims(value)
	if err != nil {
		return Principal{}, err
	}
	roles, err := ParseRoles(c.Roles)
	if err != nil {
		return Principal{}, ErrBadToken
	}
	u, ok := a.users[c.Sub]
	if !ok {
		return Principal{}, ErrBadToken
	}
	if !hmac.Equal([]byte(c.Cred), []byte(credentialFingerprint(u))) || a.revoked.Revoked(c.Jti) {
		return Principal{}, ErrRevokedToken
	}
	p := u.principal(MethodBearer)
	p.TokenID = c.Jti
	p.Roles &= roles
	p.Grants = nil
	for _, g := range u.Grants {
		if g.Roles&roles != 0 {
			p.Grants = append(p.Grants, Grant{Roles: g.Roles & roles, Streams: g.Streams})
		}
	}
	return p, nil
}

// Revoke revokes the valid token value until it expires (logout).
func (a *Authenticator) Revoke(value string) error {
	if _, err := a.VerifyToken(value); err != nil {
		return err
	}
	c, err := a.claims(value)
	if err != nil {
		return err
	}
	return a.revoked.Revoke(c.Jti, time.Unix(c.Exp, 0))
}

// claims returns the claims of a well-signed, unexpired token. A token
// whose signature checked out is remembered with its claims (tokenCache):
// members send the same token on every heartbeat, and checking its
// signature and decoding its claims was most of a heartbeat's
// authentication. Expiry is checked on every call all the same, and
// revocation and the credential by VerifyToken after it.
func (a *Authenticator) claims(value string) (claims, error) {
	c, ok := a.tokens.get(value)
	if !ok {
		var err error
		if c, err = a.verifiedClaims(value); err != nil {
			return claims{}, err
		}
	}
	if !a.now().Before(time.Unix(c.Exp, 0)) {
		return claims{}, ErrExpiredToken
	}
	if !ok {
		// A copy: value may be part of a larger header string.
		a.tokens.put(strings.Clone(value), c, a.now())
	}
	return c, nil
}

// verifiedClaims returns the claims of a well-signed token.
func (a *Authenticator) verifiedClaims(value string) (claims, error) {
	i := strings.LastIndexByte(value, '.')
	if !strings.HasPrefix(value, tokenPrefix) || i <= len(tokenPrefix) {
		return claims{}, ErrBadToken
	}
	signed, sig := value[:i], value[i+1:]
	// Strict: a signature's last character has spare bits, and a lenient
	// decoder would accept several spellings of one token.
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return claims{}, ErrBadToken
	}
	good := false
	for _, secret := range a.secrets {
		good = hmac.Equal(got, sign(secret, signed)) || good
	}
	if !good {
		return claims{}, ErrBadToken
	}
	body, err := base64.RawURLEncoding.DecodeString(signed[len(tokenPrefix):])
	if err != nil {
		return claims{}, ErrBadToken
	}
	var c claims
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Jti == "" || c.Cred == "" {
		return claims{}, ErrBadToken
	}
	return c, nil
}

// tokenCache remembers the claims of tokens whose signature checked out,
// each until its expiry, at most max of them: when full, the expired ones
// go, and all of them if none has.
type tokenCache struct {
	max int

	mu      sync.Mutex
	entries map[string]claims
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: map[string]claims{}}
}

func (t *tokenCache) get(value string) (claims, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.entries[value]
	return c, ok
}

func (t *tokenCache) put(value string, c claims, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.entries) >= t.max {
		for k, old := range t.entries {
			if !now.Before(time.Unix(old.Exp, 0)) {
				delete(t.entries, k)
			}
		}
		if len(t.entries) >= t.max {
			clear(t.entries)
		}
	}
	t.entries[value] = c
}
