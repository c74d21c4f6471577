package protocol

import "time"

// LoginRequest is the body of POST /auth/login. An empty body with an
// Authorization: Basic header is accepted instead (docs/protocol.md §4).
type LoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// LoginResponse answers a successful login.
type LoginResponse struct {
	AccessToken string `json:"accessToken"`
	// TokenType is always "Bearer".
	TokenType        string    `json:"tokenType"`
	ExpiresAt        time.Time `json:"expiresAt"`
	ExpiresInSeconds int64     `json:"expiresInSeconds"`
	Roles            []string  `json:"roles"`
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
