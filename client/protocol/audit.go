package protocol

import "time"

// AuditOperation names an audited admin mutation.
type AuditOperation string

// Audited operations: every admin mutation of docs/protocol.md §5.
const (
	AuditCreateStream AuditOperation = "CREATE_STREAM"
	AuditCreateGroup  AuditOperation = "CREATE_GROUP"
	AuditDeleteGroup  AuditOperation = "DELETE_GROUP"
	// AuditDeleteStream (ours): DELETE /streams/{p}.
	AuditDeleteStream      AuditOperation = "DELETE_STREAM"
	AuditScale             AuditOperation = "SCALE"
	AuditRollback          AuditOperation = "ROLLBACK"
	AuditCompleteMigration AuditOperation = "COMPLETE_MIGRATION"
	// AuditResetOffsets (ours): an offsets reset, dry runs included.
	AuditResetOffsets AuditOperation = "RESET_OFFSETS"
	// AuditAcceptWALLoss is not an admin call: the store opened without
	// acknowledged writes its write-ahead log lost (--accept-wal-loss).
	AuditAcceptWALLoss AuditOperation = "ACCEPT_WAL_LOSS"
	// AuditRegisterGroup (ours): a group registered on the fly by a
	// member's join or a producer's routing request (auto-create), not by
	// an admin route. Its entry names the principal; it has no request
	// fields of its own.
	AuditRegisterGroup AuditOperation = "REGISTER_GROUP"
	// AuditSetAutoscale (ours): PUT /streams/{p}/autoscale.
	AuditSetAutoscale AuditOperation = "SET_AUTOSCALE"
	// AuditAutoscale (ours): not an admin call: the autoscaling policy
	// decided to scale a stream (requestedBy "autoscale"), taken in mode
	// on or only reported in dry-run. Its reason names the decision.
	AuditAutoscale AuditOperation = "AUTOSCALE"
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
	ID string `json:"id"`
	// Time is when the mutation's answer was ready (UTC).
	Time time.Time `json:"time"`
	// Operation is the mutation asked for.
	Operation AuditOperation `json:"operation"`
	// StreamPrefix is the stream named in the path.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group named in the path; empty when the route
	// has none.
	ConsumerGroup string `json:"consumerGroup"`
	// ReshardingID is the migration named in the path (rollback,
	// complete); empty when the route has none.
	ReshardingID string `json:"reshardingId"`
	// Requested holds the values the body asked for.
	Requested AuditRequested `json:"requested"`
	// RequestedBy is the body's requestedBy, cut at 1024 bytes; empty
	// when the body was not read (a refusal before the handler) or did
	// not parse.
	RequestedBy string `json:"requestedBy"`
	// Reason is the body's reason, cut and left empty as RequestedBy is.
	Reason string `json:"reason"`
	// Principal is the authenticated user, "" when authentication failed,
	// "anonymous" with authentication off.
	Principal string `json:"principal"`
	// Roles are the roles the principal holds on every stream (roles
	// granted on some streams only are not listed); empty when
	// authentication failed.
	Roles []string `json:"roles"`
	// AuthMethod is "basic", "bearer", "none" (authentication off) or ""
	// (no valid credentials).
	AuthMethod string `json:"authMethod"`
	// RequestID is the request's X-Request-Id: the client's when it sent
	// a valid one, else one the server made; the answer carries it too.
	RequestID string `json:"requestId"`
	// ClientAddress is the caller's IP address: from the connection (or,
	// for a request another replica forwarded, the one it signed), or,
	// when that peer is a trusted proxy (--trusted-proxies), the client
	// its X-Forwarded-For or X-Real-IP names.
	ClientAddress string `json:"clientAddress"`
	// UserAgent is the request's User-Agent, cut at 1024 bytes.
	UserAgent string `json:"userAgent"`
	// Method is the HTTP method.
	Method string `json:"method"`
	// Route is the route's pattern, such as
	// "/coord/v1/streams/:prefix/scale".
	Route string `json:"route"`
	// DurationMs is how long the server took to answer, in milliseconds
	// (microsecond precision), the audit write not included.
	DurationMs float64 `json:"durationMs"`
	// BodySHA256 is the hex SHA-256 of the body as its handler read it;
	// empty when nothing was read.
	BodySHA256 string `json:"bodySha256"`
	// Result is how the mutation was answered.
	Result AuditResult `json:"result"`
}

// AuditRequested holds the values a mutation asked for, as far as its body
// could be read; absent values are left out.
type AuditRequested struct {
	// InitialShardCount is the body's initialShardCount (a create's).
	InitialShardCount *int `json:"initialShardCount,omitempty"`
	// TargetShardCount is the body's targetShardCount (a scale's).
	TargetShardCount *int `json:"targetShardCount,omitempty"`
	// Force is the body's force (a group or stream delete's).
	Force *bool `json:"force,omitempty"`
	// DeleteKeys is the body's deleteKeys (a stream delete's).
	DeleteKeys *bool `json:"deleteKeys,omitempty"`
	// DeprecatedAfter is the body's deprecatedAfter (a scale's).
	DeprecatedAfter *time.Time `json:"deprecatedAfter,omitempty"`
}

// AuditResult is how a mutation was answered.
type AuditResult struct {
	// Outcome is ACCEPTED (2xx) or REFUSED.
	Outcome string `json:"outcome"`
	// Status is the HTTP status answered.
	Status int `json:"status"`
	// ErrorCode is the §3 error code of a refusal, "" when accepted.
	ErrorCode ErrorCode `json:"errorCode"`
}

// AuditPage answers GET /monitoring/audit: entries newest first, and the
// cursor of the next (older) page as the before parameter, or null.
type AuditPage struct {
	// Entries are at most limit entries, newest first.
	Entries []AuditEntry `json:"entries"`
	// Next is the before parameter of the next (older) page; null on the
	// last page.
	Next *string `json:"next"`
}
