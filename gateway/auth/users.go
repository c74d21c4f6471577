package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/client/protocol"
)

// User is one configured user.
type User struct {
	Username string
	// PasswordHash is a bcrypt hash ($2a$, $2b$ or $2y$).
	PasswordHash []byte
	// Credential, when set, is what the user's tokens are issued for in
	// place of PasswordHash: a token names it (hashed), and a user whose
	// Credential changed has every older token refused. It lets a
	// password hashed afresh at every start (with a new salt) keep its
	// tokens; see [BootstrapAdmin].
	Credential []byte
	// Roles hold on every stream.
	Roles Roles
	// Grants hold on the streams they name only.
	Grants []Grant
	// MemberIDs, when not empty, bind the user to member ids matching one
	// of them: its heartbeats as any other id are refused (403).
	MemberIDs []Pattern
}

// principal is u authenticated by method.
func (u User) principal(method Method) Principal {
	return Principal{Username: u.Username, Roles: u.Roles, Grants: u.Grants, MemberIDs: u.MemberIDs, Method: method}
}

// UsersFile is the JSON format of --users:
//
//	{"users": [
//	  {"username": "ops", "passwordHash": "$2a$10$…", "roles": ["WRITE"]},
//	  {"username": "orders-consumer", "passwordHash": "$2a$10$…", "roles": ["READ"],
//	   "grants": [{"roles": ["MEMBER"], "streams": ["orders*"]}],
//	   "memberIds": ["orders-pod-*"]}
//	]}
//
// "roles" hold on every stream; each of "grants" holds only on the streams
// its patterns match (Kafka-style prefix ACLs: "orders" is that stream
// only, "orders*" every stream whose name starts with "orders", "*" all).
// A user needs at least one role or grant. "memberIds", when present,
// binds the user's heartbeats to member ids matching one of its patterns,
// so that one tenant's pods cannot heartbeat as another's.
//
// Hashes come from `rscoord hash-password`. Unknown fields are refused, so
// that a misspelt "password" field cannot silently leave a user without
// one.
type UsersFile struct {
	Users []UserEntry `json:"users"`
}

// UserEntry is one user of a [UsersFile].
type UserEntry struct {
	Username     string       `json:"username"`
	PasswordHash string       `json:"passwordHash"`
	Roles        []string     `json:"roles"`
	Grants       []GrantEntry `json:"grants,omitempty"`
	MemberIDs    []string     `json:"memberIds,omitempty"`
}

// GrantEntry is one scoped grant of a [UserEntry].
type GrantEntry struct {
	Roles   []string `json:"roles"`
	Streams []string `json:"streams"`
}

// LoadUsersFile reads and checks a users file. Every problem is reported
// at once, by user name and never with a hash.
func LoadUsersFile(path string) ([]User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	if err := CheckNotSharedWritable(path, fi.Mode()); err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	users, err := ParseUsers(raw)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return users, nil
}

// CheckNotSharedWritable refuses a file that its group or others may
// write. The users file grants roles and the config file can turn
// authentication off: whoever may write either may make themselves ADMIN.
func CheckNotSharedWritable(path string, mode fs.FileMode) error {
	if mode.Perm()&0o022 != 0 {
		return fmt.Errorf("%s has mode %v: group or others may write it, and so grant themselves any role; make it writable by its owner only (chmod go-w)", path, mode.Perm())
	}
	return nil
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
	if len(e.Roles) == 0 && len(e.Grants) == 0 {
		return User{}, errors.New("no roles and no grants")
	}
	roles, err := ParseRoles(e.Roles)
	if err != nil {
		return User{}, err
	}
	u := User{Username: e.Username, PasswordHash: []byte(e.PasswordHash), Roles: roles}
	for i, g := range e.Grants {
		gr, err := ParseRoles(g.Roles)
		if err != nil {
			return User{}, fmt.Errorf("grant %d: %w", i+1, err)
		}
		if gr == 0 || len(g.Streams) == 0 {
			return User{}, fmt.Errorf("grant %d: needs roles and streams", i+1)
		}
		pats, err := ParsePatterns(g.Streams, protocol.ValidateStreamPrefix)
		if err != nil {
			return User{}, fmt.Errorf("grant %d: %w", i+1, err)
		}
		u.Grants = append(u.Grants, Grant{Roles: gr, Streams: pats})
	}
	if e.MemberIDs != nil {
		if len(e.MemberIDs) == 0 {
			return User{}, errors.New("memberIds is empty: leave it out to allow every member id")
		}
		if u.MemberIDs, err = ParsePatterns(e.MemberIDs, protocol.ValidateMemberID); err != nil {
			return User{}, fmt.Errorf("memberIds: %w", err)
		}
	}
	return u, nil
}

// ParsePatterns checks name patterns: "*", or a name (checked by valid)
// with an optional trailing "*".
func ParsePatterns(raw []string, valid func(string) error) ([]Pattern, error) {
	out := make([]Pattern, 0, len(raw))
	for _, r := range raw {
		if name, _ := strings.CutSuffix(r, "*"); name != "" {
			if err := valid(name); err != nil {
				return nil, fmt.Errorf("pattern %q: %w", r, err)
			}
		} else if r != "*" {
			return nil, errors.New("empty pattern")
		}
		out = append(out, Pattern(r))
	}
	return out, nil
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
