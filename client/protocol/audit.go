package protocol

import "time"

// AuditOperation names an audited admin mutation.
type AuditOperation string

// Audited operations: every admin mutation of docs/protocol.md §5.
const (
	AuditCreateStream      AuditOperation = "CREATE_STREAM"
	AuditCreateGroup       AuditOperation = "CREATE_GROUP"
	AuditDeleteGroup       AuditOperation = "DELETE_GROUP"
	AuditScale             AuditOperation = "SCALE"
	AuditRollback          AuditOperation = "ROLLBACK"
	AuditCompleteMigration AuditOperation = "COMPLETE_MIGRATION"
)

// Audit outcomes.
const (
	// AuditAccepted: the mutation answered 2xx.
	AuditAccepted = "ACCEPTED"
	// AuditRefused: any other answer (401, 403, 429, 4xx, 5xx).
	AuditRefused = "REFUSED"
)

// AuditEntry is one audited admin mutation, allowed or refused, as GET
// /monitoring/audit answers it (ours).
type AuditEntry struct {
	// ID orders entries (higher is newer) and is the paging cursor.
	ID        string         `json:"id"`
	Time      time.Time      `json:"time"`
	Operation AuditOperation `json:"operation"`
	// StreamPrefix, ConsumerGroup and ReshardingID come from the path;
	// empty when the route has none.
	StreamPrefix  string         `json:"streamPrefix"`
	ConsumerGroup string         `json:"consumerGroup"`
	ReshardingID  string         `json:"reshardingId"`
	Requested     AuditRequested `json:"requested"`
	RequestedBy   string         `json:"requestedBy"`
	Reason        string         `json:"reason"`
	// Principal is the authenticated user, "" when authentication failed,
	// "anonymous" with authentication off.
	Principal string   `json:"principal"`
	Roles     []string `json:"roles"`
	// AuthMethod is "basic", "bearer", "none" (authentication off) or ""
	// (no valid credentials).
	AuthMethod    string      `json:"authMethod"`
	RequestID     string      `json:"requestId"`
	ClientAddress string      `json:"clientAddress"`
	UserAgent     string      `json:"userAgent"`
	Method        string      `json:"method"`
	Route         string      `json:"route"`
	DurationMs    float64     `json:"durationMs"`
	BodySHA256    string      `json:"bodySha256"`
	Result        AuditResult `json:"result"`
}

// AuditRequested holds the values a mutation asked for, as far as its body
// could be read; absent values are left out.
type AuditRequested struct {
	InitialShardCount *int       `json:"initialShardCount,omitempty"`
	TargetShardCount  *int       `json:"targetShardCount,omitempty"`
	Force             *bool      `json:"force,omitempty"`
	DeprecatedAfter   *time.Time `json:"deprecatedAfter,omitempty"`
}

// AuditResult is how a mutation was answered.
type AuditResult struct {
	// Outcome is ACCEPTED (2xx) or REFUSED.
	Outcome string `json:"outcome"`
	Status  int    `json:"status"`
	// ErrorCode is the §3 error code of a refusal, "" when accepted.
	ErrorCode ErrorCode `json:"errorCode"`
}

// AuditPage answers GET /monitoring/audit: entries newest first, and the
// cursor of the next (older) page as the before parameter, or null.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    *string      `json:"next"`
}
