package protocol

import "time"

// LoginRequest is the body of POST /auth/login. An empty body with an
// Authorization: Basic header is accepted instead (docs/protocol.md §4).
type LoginRequest struct {
	// Username is the user to sign in as.
	Username string `json:"username"`
	// Password is the user's password.
	Password string `json:"password"`
}

// LoginResponse answers a successful login.
type LoginResponse struct {
	// AccessToken is sent as "Authorization: Bearer <accessToken>" (see
	// [BearerAuthorization]) until it expires, is revoked by logout, or
	// its user's password changes or the user is removed.
	AccessToken string `json:"accessToken"`
	// TokenType is always "Bearer".
	TokenType string `json:"tokenType"`
	// ExpiresAt is when the token expires (UTC); its lifetime is
	// --token-ttl, 7 days by default.
	ExpiresAt time.Time `json:"expiresAt"`
	// ExpiresInSeconds is the time left until ExpiresAt, in whole seconds.
	ExpiresInSeconds int64 `json:"expiresInSeconds"`
	// Roles are every role the user holds, on every stream or only on
	// some, in the order of docs/protocol.md §4.
	Roles []string `json:"roles"`
}

// Roles of docs/protocol.md §4.
const (
	// RoleRead may call every GET, producer routing included.
	RoleRead = "READ"
	// RoleWrite may do what READ may, plus every admin mutation.
	RoleWrite = "WRITE"
	// RoleMember may heartbeat (when member auth is on) and ask for
	// producer routing. WRITE does not imply it.
	RoleMember = "MEMBER"
	// RoleAdmin may do everything.
	RoleAdmin = "ADMIN"
	// RoleMonitor is READ under another name, for dashboards.
	RoleMonitor = "MONITOR"
)

// AllRoles lists every role, in the order of docs/protocol.md §4.
func AllRoles() []string {
	return []string{RoleRead, RoleWrite, RoleMember, RoleAdmin, RoleMonitor}
}
