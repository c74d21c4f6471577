package auth

import "strings"

// Method says how a principal proved who it is.
type Method string

// Authentication methods.
const (
	MethodBasic  Method = "basic"
	MethodBearer Method = "bearer"
	// MethodNone: authentication is off and every caller is an anonymous
	// ADMIN.
	MethodNone Method = "none"
)

// AnonymousName is the principal name of every caller when authentication
// is off.
const AnonymousName = "anonymous"

// Principal is an authenticated caller.
type Principal struct {
	Username string
	// Roles hold on every stream.
	Roles Roles
	// Grants are roles that hold only on the streams they name.
	Grants []Grant
	// MemberIDs, when not empty, are the only member ids the principal may
	// heartbeat as.
	MemberIDs []Pattern
	Method    Method
	// TokenID is the id of the bearer token the principal presented; empty
	// for other methods.
	TokenID string
	// APIToken is the name of the API token the principal presented;
	// empty for other credentials.
	APIToken string
}

// Grant gives roles on the streams its patterns match.
type Grant struct {
	Roles   Roles
	Streams []Pattern
}

// Pattern matches names Kafka-ACL style: "orders" matches that name only,
// "orders*" every name starting with "orders", "*" every name.
type Pattern string

// Match reports whether name matches p.
func (p Pattern) Match(name string) bool {
	if prefix, ok := strings.CutSuffix(string(p), "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return string(p) == name
}

// Anonymous is the principal of every caller when authentication is off.
func Anonymous() Principal {
	return Principal{Username: AnonymousName, Roles: Admin, Method: MethodNone}
}

// Allowed reports whether p may use a route that needs perm and names no
// stream (or spans every stream): only roles held on every stream count.
func (p Principal) Allowed(perm Permission) bool { return p.Roles.Allows(perm) }

// AllowedOn reports whether p may use a route that needs perm on stream.
func (p Principal) AllowedOn(perm Permission, stream string) bool {
	if p.Roles.Allows(perm) {
		return true
	}
	for _, g := range p.Grants {
		if g.Roles.Allows(perm) && matchAny(g.Streams, stream) {
			return true
		}
	}
	return false
}

// MemberAllowed reports whether p may heartbeat as member id.
func (p Principal) MemberAllowed(id string) bool {
	return len(p.MemberIDs) == 0 || matchAny(p.MemberIDs, id)
}

// AllRoles are the roles p holds anywhere: on every stream or on some.
func (p Principal) AllRoles() Roles {
	r := p.Roles
	for _, g := range p.Grants {
		r |= g.Roles
	}
	return r
}

func matchAny(patterns []Pattern, name string) bool {
	for _, pat := range patterns {
		if pat.Match(name) {
			return true
		}
	}
	return false
}
