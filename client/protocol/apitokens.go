package protocol

import "time"

// Audited operations on API tokens (ours).
const (
	AuditCreateAPIToken AuditOperation = "CREATE_API_TOKEN"
	AuditRevokeAPIToken AuditOperation = "REVOKE_API_TOKEN"
)

// CodeAPITokenAlreadyExists (409): an API token of that name exists;
// revoke it first or pick another name.
const CodeAPITokenAlreadyExists ErrorCode = "API_TOKEN_ALREADY_EXISTS"

// APITokenCreateRequest is the body of POST /auth/tokens (ADMIN).
type APITokenCreateRequest struct {
	// Username is the configured user the token authenticates as, with
	// that user's roles.
	Username string `json:"username"`
	// Name names the token, unique on the server: 1-200 characters of
	// [A-Za-z0-9._@-].
	Name string `json:"name"`
	// ExpiresInSeconds, when set, makes the token stop working that many
	// seconds after its creation; absent, it works until revoked.
	ExpiresInSeconds *int64 `json:"expiresInSeconds,omitempty"`
	// RequestedBy names who asks; required and non-blank: the audit log
	// records it.
	RequestedBy string `json:"requestedBy"`
	// Reason (optional) is recorded in the audit log.
	Reason string `json:"reason,omitempty"`
}

// APIToken describes one API token; its secret is shown only once, when
// it is created.
type APIToken struct {
	// Name names the token.
	Name string `json:"name"`
	// Username is the user it authenticates as.
	Username string `json:"username"`
	// CreatedAt is when it was created (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// CreatedBy is the principal that created it.
	CreatedBy string `json:"createdBy"`
	// ExpiresAt is when it stops working; null: never.
	ExpiresAt *time.Time `json:"expiresAt"`
}

// APITokenCreateResponse answers a created API token.
type APITokenCreateResponse struct {
	APIToken
	// Token is sent as "Authorization: Bearer <token>". The server keeps
	// only its hash: it cannot be shown again.
	Token string `json:"token"`
	// TokenType is always "Bearer".
	TokenType string `json:"tokenType"`
}

// APITokensResponse answers GET /auth/tokens: every API token, by name.
type APITokensResponse struct {
	Tokens []APIToken `json:"tokens"`
}

// APITokenRevokeRequest is the optional body of DELETE /auth/tokens/{name}.
type APITokenRevokeRequest struct {
	// RequestedBy and Reason are recorded in the audit log.
	RequestedBy string `json:"requestedBy,omitempty"`
	Reason      string `json:"reason,omitempty"`
}
