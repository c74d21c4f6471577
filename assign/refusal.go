package assign

import "github.com/rscoord/rscoord/client/protocol"

// Refusal is a heartbeat answered without a decision of its group: the
// request is invalid or of an unsupported protocol, its stream or group is
// unknown, or the coordinator cannot decide now (RETRY). Whoever refuses
// says only this; [Refusal.Answer] is the one place a refusal becomes a
// heartbeat answer.
type Refusal struct {
	// Status is the answer's status; "" is no refusal.
	Status protocol.Status
	// Code and Message say why, apart from the status (docs/protocol.md
	// §9.7); both may be empty.
	Code    protocol.ErrorCode
	Message string
}

// Refused reports whether r refuses (is not the zero Refusal).
func (r Refusal) Refused() bool { return r.Status != "" }

// Retry is RETRY without a reason: the store is unavailable, the group
// failed closed, the coordinator is shutting down or overloaded. The
// member keeps its shards and heartbeats again after the normal interval;
// its lease bounds how long it reads without an OK.
func Retry() Refusal { return Refusal{Status: protocol.StatusRetry} }

// RetryBecause is RETRY with code and message saying why, for a refusal
// the member can do nothing about but wait (a join whose group may not be
// registered now: GROUP_LIMIT_REACHED). The member heartbeats again after
// the normal interval.
func RetryBecause(code protocol.ErrorCode, message string) Refusal {
	return Refusal{Status: protocol.StatusRetry, Code: code, Message: message}
}

// Invalid is INVALID_REQUEST with errorCode INVALID_REQUEST and problem as
// its message (docs/protocol.md §9.7): a heartbeat refused before it
// reaches a group (Validate; a stream prefix or group name that is not
// valid; a body the gateway cannot read as a heartbeat) or by it (an epoch
// from the future). The member stops and fails loudly.
func Invalid(problem string) Refusal {
	return Refusal{Status: protocol.StatusInvalidRequest, Code: protocol.CodeInvalidRequest, Message: problem}
}

// Unknown is UNKNOWN_MEMBER_ID for a heartbeat whose stream or group does
// not exist (docs/protocol.md §6.1 step 2), with code and message saying
// which, so that a client can tell a join that can never succeed from one
// that can. The member stops reading and rejoins.
func Unknown(code protocol.ErrorCode, message string) Refusal {
	return Refusal{Status: protocol.StatusUnknownMemberID, Code: code, Message: message}
}

// Answer is the answer to req that r refuses. It carries no group
// information: it echoes the request's id, member and epoch, has zero group
// and assignment epochs and versions and an empty assignment, and the
// normal (always positive) intervals, because every client sleeps on
// heartbeatIntervalMs whatever the status. A nil req echoes nothing.
func (r Refusal) Answer(req *protocol.HeartbeatRequest, cfg Config) protocol.HeartbeatResponse {
	cfg = cfg.EnsureDefaults()
	if req == nil {
		req = &protocol.HeartbeatRequest{}
	}
	return protocol.HeartbeatResponse{
		ResponseTo:          req.RequestID,
		Status:              r.Status,
		MemberID:            req.MemberID,
		MemberEpoch:         req.MemberEpoch,
		HeartbeatIntervalMs: millis(cfg.HeartbeatInterval),
		RebalanceTimeoutMs:  millis(cfg.RebalanceTimeout),
		Assignment:          protocol.EmptyAssignment(0),
		MemberLeaseMs:       millis(cfg.MemberLease),
		ErrorCode:           r.Code,
		Message:             r.Message,
	}
}

// RetryResponse is Retry().Answer(req, cfg), for callers outside the
// coordinator that answer RETRY themselves (a cluster front whose owner
// does not answer, test servers).
func RetryResponse(req *protocol.HeartbeatRequest, cfg Config) protocol.HeartbeatResponse {
	return Retry().Answer(req, cfg)
}
