package auth

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
	Roles    Roles
	Method   Method
}

// Anonymous is the principal of every caller when authentication is off.
func Anonymous() Principal {
	return Principal{Username: AnonymousName, Roles: Admin, Method: MethodNone}
}

// Allowed reports whether p may use a route that needs perm.
func (p Principal) Allowed(perm Permission) bool { return p.Roles.Allows(perm) }
