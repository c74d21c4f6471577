package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// User is one configured user.
type User struct {
	Username string
	// PasswordHash is a bcrypt hash ($2a$, $2b$ or $2y$).
	PasswordHash []byte
	Roles        Roles
}

// UsersFile is the JSON format of --users:
//
//	{"users": [
//	  {"username": "ops", "passwordHash": "$2a$10$…", "roles": ["WRITE"]},
//	  {"username": "orders-consumer", "passwordHash": "$2a$10$…", "roles": ["MEMBER", "READ"]}
//	]}
//
// Hashes come from `rscoord hash-password`. Unknown fields are refused, so
// that a misspelt "password" field cannot silently leave a user without
// one.
type UsersFile struct {
	Users []UserEntry `json:"users"`
}

// UserEntry is one user of a [UsersFile].
type UserEntry struct {
	Username     string   `json:"username"`
	PasswordHash string   `json:"passwordHash"`
	Roles        []string `json:"roles"`
}

// LoadUsersFile reads and checks a users file. Every problem is reported
// at once, by user name and never with a hash.
func LoadUsersFile(path string) ([]User, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	users, err := ParseUsers(raw)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return users, nil
}

// ParseUsers decodes and checks the JSON of a [UsersFile].
func ParseUsers(raw []byte) ([]User, error) {
	var f UsersFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a users file: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not a users file: trailing data after the JSON object")
	}
	var errs []error
	seen := map[string]bool{}
	out := make([]User, 0, len(f.Users))
	for i, e := range f.Users {
		u, err := e.user()
		if err != nil {
			errs = append(errs, fmt.Errorf("user %d (%q): %w", i+1, e.Username, err))
			continue
		}
		if seen[u.Username] {
			errs = append(errs, fmt.Errorf("user %d: %q is listed twice", i+1, u.Username))
			continue
		}
		seen[u.Username] = true
		out = append(out, u)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (e UserEntry) user() (User, error) {
	if err := ValidateUsername(e.Username); err != nil {
		return User{}, err
	}
	if _, err := bcrypt.Cost([]byte(e.PasswordHash)); err != nil {
		return User{}, errors.New("passwordHash is not a bcrypt hash (make one with `rscoord hash-password`)")
	}
	if len(e.Roles) == 0 {
		return User{}, errors.New("no roles")
	}
	roles, err := ParseRoles(e.Roles)
	if err != nil {
		return User{}, err
	}
	return User{Username: e.Username, PasswordHash: []byte(e.PasswordHash), Roles: roles}, nil
}

// ValidateUsername checks a user name: 1–200 characters of
// [A-Za-z0-9._@-]. A colon would break Basic credentials, which split at
// the first one.
func ValidateUsername(name string) error {
	if name == "" || len(name) > 200 {
		return errors.New("username must be 1-200 characters")
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r))
	}); i >= 0 {
		return fmt.Errorf("username has %q at %d; use only [A-Za-z0-9._@-]", name[i], i)
	}
	return nil
}

// HashPassword returns the bcrypt hash of password at cost (0: bcrypt's
// default). bcrypt reads at most 72 bytes, so longer passwords are refused
// rather than silently cut.
func HashPassword(password string, cost int) ([]byte, error) {
	if password == "" {
		return nil, errors.New("empty password")
	}
	if len(password) > 72 {
		return nil, errors.New("password longer than 72 bytes (bcrypt's limit)")
	}
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}
