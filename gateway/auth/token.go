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
	"time"
)

// Token format (opaque to clients):
//
//	rsc1.<base64url(claims JSON)>.<base64url(HMAC-SHA256(secret, "rsc1." + base64url(claims)))>
//
// claims = {"sub": username, "roles": [...], "iat": unix, "exp": unix, "jti": random}.
// The version prefix is signed too, so a token cannot be replayed as
// another format.
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
)

type claims struct {
	Sub   string   `json:"sub"`
	Roles []string `json:"roles"`
	Iat   int64    `json:"iat"`
	Exp   int64    `json:"exp"`
	Jti   string   `json:"jti"`
}

// Token is an issued access token.
type Token struct {
	// Value is the bearer token.
	Value     string
	ExpiresAt time.Time
}

func (a *Authenticator) sign(msg string) []byte {
	mac := hmac.New(sha256.New, a.secret)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

// Issue signs a token for p that expires after the configured TTL.
func (a *Authenticator) Issue(p Principal) (Token, error) {
	now := a.now().UTC()
	exp := now.Add(a.ttl).Truncate(time.Second)
	jti := make([]byte, 12)
	if _, err := rand.Read(jti); err != nil {
		return Token{}, fmt.Errorf("issue token: %w", err)
	}
	body, err := json.Marshal(claims{
		Sub: p.Username, Roles: p.Roles.Names(), Iat: now.Unix(), Exp: exp.Unix(),
		Jti: base64.RawURLEncoding.EncodeToString(jti),
	})
	if err != nil {
		return Token{}, fmt.Errorf("issue token: %w", err)
	}
	signed := tokenPrefix + base64.RawURLEncoding.EncodeToString(body)
	return Token{Value: signed + "." + base64.RawURLEncoding.EncodeToString(a.sign(signed)), ExpiresAt: exp}, nil
}

// VerifyToken checks value's signature and expiry and returns its
// principal, whose roles are those of the token that the user still has.
func (a *Authenticator) VerifyToken(value string) (Principal, error) {
	i := strings.LastIndexByte(value, '.')
	if !strings.HasPrefix(value, tokenPrefix) || i <= len(tokenPrefix) {
		return Principal{}, ErrBadToken
	}
	signed, sig := value[:i], value[i+1:]
	// Strict: a signature's last character has spare bits, and a lenient
	// decoder would accept several spellings of one token.
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.sign(signed)) {
		return Principal{}, ErrBadToken
	}
	body, err := base64.RawURLEncoding.DecodeString(signed[len(tokenPrefix):])
	if err != nil {
		return Principal{}, ErrBadToken
	}
	var c claims
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Principal{}, ErrBadToken
	}
	if !a.now().Before(time.Unix(c.Exp, 0)) {
		return Principal{}, ErrExpiredToken
	}
	roles, err := ParseRoles(c.Roles)
	if err != nil {
		return Principal{}, ErrBadToken
	}
	u, ok := a.users[c.Sub]
	if !ok {
		return Principal{}, ErrBadToken
	}
	return Principal{Username: u.Username, Roles: roles & u.Roles, Method: MethodBearer}, nil
}
