package protocol

import (
	"net/http"
	"strings"
)

// ErrorCode names a failure in an error body (docs/protocol.md §3).
type ErrorCode string

// Error codes and, through [ErrorCode.HTTPStatus], their HTTP statuses.
const (
	CodeInvalidRequest                ErrorCode = "INVALID_REQUEST"
	CodeUnauthorized                  ErrorCode = "UNAUTHORIZED"
	CodeForbidden                     ErrorCode = "FORBIDDEN"
	CodeNotFound                      ErrorCode = "NOT_FOUND"
	CodeMethodNotAllowed              ErrorCode = "METHOD_NOT_ALLOWED"
	CodeStreamNotFound                ErrorCode = "STREAM_NOT_FOUND"
	CodeGroupNotFound                 ErrorCode = "GROUP_NOT_FOUND"
	CodeMigrationNotFound             ErrorCode = "MIGRATION_NOT_FOUND"
	CodeGroupAlreadyExists            ErrorCode = "GROUP_ALREADY_EXISTS"
	CodeStreamPrefixAlreadyExists     ErrorCode = "STREAM_PREFIX_ALREADY_EXISTS"
	CodeActiveMigrationExists         ErrorCode = "ACTIVE_MIGRATION_EXISTS"
	CodeMetadataSyncInProgress        ErrorCode = "METADATA_SYNC_IN_PROGRESS"
	CodeGroupHasActiveMembers         ErrorCode = "GROUP_HAS_ACTIVE_MEMBERS"
	CodeRollbackNotAllowed            ErrorCode = "ROLLBACK_NOT_ALLOWED"
	CodePayloadTooLarge               ErrorCode = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType          ErrorCode = "UNSUPPORTED_MEDIA_TYPE"
	CodeRateLimitExceeded             ErrorCode = "RATE_LIMIT_EXCEEDED"
	CodeRedisNotConfigured            ErrorCode = "REDIS_NOT_CONFIGURED"
	CodeRedisStreamProvisioningFailed ErrorCode = "REDIS_STREAM_PROVISIONING_FAILED"
	// CodeRedisUnavailable (ours): Redis did not answer, or refused, a
	// read the request needs; retry later.
	CodeRedisUnavailable ErrorCode = "REDIS_UNAVAILABLE"
	// CodeMemberLimitReached (ours): the group already has as many
	// members as the coordinator allows. Carried by a join's RETRY
	// heartbeat answer (errorCode), never as an HTTP status of its own.
	CodeMemberLimitReached ErrorCode = "MEMBER_LIMIT_REACHED"
	// CodeMemberIDInUse (ours): another live process holds this member
	// id (its instanceId differs). Carried by a join's RETRY heartbeat
	// answer (errorCode), never as an HTTP status of its own.
	CodeMemberIDInUse ErrorCode = "MEMBER_ID_IN_USE"
	// CodeGroupLimitReached (ours): the group does not exist and may not
	// be registered on the fly: its stream holds the most groups callers
	// without ADMIN may have registered, or these credentials registered
	// the most groups of their window. A join's RETRY heartbeat answer
	// carries it (errorCode); producer routing answers it as a 409.
	CodeGroupLimitReached ErrorCode = "GROUP_LIMIT_REACHED"
	// CodeStreamHasGroups (ours): a stream delete without force while the
	// stream still has consumer groups.
	CodeStreamHasGroups ErrorCode = "STREAM_HAS_GROUPS"
	// CodeOffsetsResetInProgress (ours): a forced offsets reset while
	// another one of the same group still holds shards out.
	CodeOffsetsResetInProgress ErrorCode = "OFFSETS_RESET_IN_PROGRESS"
	CodeCoordinatorTerminating ErrorCode = "COORDINATOR_TERMINATING"
	CodeStoreUnavailable       ErrorCode = "STORE_UNAVAILABLE"
	CodeInternal               ErrorCode = "INTERNAL_ERROR"
	// CodeReplicaNotOwner (ours, cluster mode): this replica does not run
	// the stream and could not reach the replica that does. Another
	// replica may serve the request now.
	CodeReplicaNotOwner ErrorCode = "REPLICA_NOT_OWNER"
	// CodeReplicaLeaseUncertain (ours, cluster mode): this replica cannot
	// confirm its etcd lease (etcd is slow or out of reach), so it serves
	// nothing until it can. Another replica may serve the request now.
	CodeReplicaLeaseUncertain ErrorCode = "REPLICA_LEASE_UNCERTAIN"
	// CodeReplicaJoining (ours, cluster mode): this replica is still
	// joining the cluster, or joining it again after a lost lease.
	// Another replica may serve the request now.
	CodeReplicaJoining ErrorCode = "REPLICA_JOINING"
)

// ServedElsewhere reports whether c says that this coordinator cannot
// serve the request now while another one may: a client with several
// coordinator URLs moves its next call on. A heartbeat carries such a
// code in a 200 RETRY answer; other requests in a 503.
func (c ErrorCode) ServedElsewhere() bool {
	switch c {
	case CodeReplicaNotOwner, CodeReplicaLeaseUncertain, CodeReplicaJoining,
		CodeCoordinatorTerminating, CodeStoreUnavailable:
		return true
	}
	return false
}

// HTTPStatus is the HTTP status code that carries c.
func (c ErrorCode) HTTPStatus() int {
	switch c {
	case CodeInvalidRequest:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound, CodeStreamNotFound, CodeGroupNotFound, CodeMigrationNotFound:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeGroupAlreadyExists, CodeStreamPrefixAlreadyExists, CodeActiveMigrationExists,
		CodeMetadataSyncInProgress, CodeGroupHasActiveMembers, CodeMemberLimitReached, CodeMemberIDInUse,
		CodeGroupLimitReached, CodeAPITokenAlreadyExists, CodeStreamHasGroups, CodeOffsetsResetInProgress:
		return http.StatusConflict
	case CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case CodeRollbackNotAllowed:
		return http.StatusUnprocessableEntity
	case CodeRateLimitExceeded:
		return http.StatusTooManyRequests
	case CodeRedisNotConfigured, CodeRedisStreamProvisioningFailed, CodeRedisUnavailable,
		CodeCoordinatorTerminating, CodeStoreUnavailable,
		CodeReplicaNotOwner, CodeReplicaLeaseUncertain, CodeReplicaJoining:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// ErrorBody is the body of every non-2xx answer.
type ErrorBody struct {
	// Status is the HTTP reason phrase in upper snake case, e.g. "CONFLICT".
	Status string `json:"status"`
	// ErrorCode says what failed (docs/protocol.md §3); clients branch on
	// it.
	ErrorCode ErrorCode `json:"errorCode"`
	// Message explains the failure for people; clients should not parse it.
	Message string `json:"message"`
}

// NewErrorBody builds the error body for code with a human message.
func NewErrorBody(code ErrorCode, message string) ErrorBody {
	return ErrorBody{Status: StatusName(code.HTTPStatus()), ErrorCode: code, Message: message}
}

// StatusName is the HTTP reason phrase of code in upper snake case:
// 409 → "CONFLICT", 413 → "REQUEST_ENTITY_TOO_LARGE".
func StatusName(code int) string {
	text := http.StatusText(code)
	if text == "" {
		return "UNKNOWN"
	}
	text = strings.NewReplacer(" ", "_", "-", "_", "'", "").Replace(text)
	return strings.ToUpper(text)
}

// Error is a failure that carries its protocol error code, so that every
// layer can return it and the gateway can answer it without guessing.
type Error struct {
	// Code is the protocol error code; [ErrorCode.HTTPStatus] gives the
	// HTTP status the gateway answers it with.
	Code ErrorCode
	// Message is the human text of the error body.
	Message string
}

// Errorf is a shorthand for building an *Error.
func Errorf(code ErrorCode, message string) *Error { return &Error{Code: code, Message: message} }

// Error returns the code and the message as "CODE: message".
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }
