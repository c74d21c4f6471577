package assign

import (
	"strings"

	"github.com/rscoord/rscoord/client/protocol"
)

// Validate runs docs/protocol.md §6.1 step 1 on a heartbeat that arrived on the
// path of member pathMemberID. ok=false means: answer resp (HTTP 200, as
// every heartbeat) and do nothing else; the member will stop and fail
// loudly. Checked, in order: protocol version (UNSUPPORTED_PROTOCOL), then
// body memberId equal to the path and a valid member id, non-blank
// requestId, runtimeMaxConcurrency ≥ 1, availableConcurrency ≥ 0,
// memberEpoch ≥ -1 (INVALID_REQUEST).
//
// Validate needs no group: the gateway or actor runs it before looking the
// group up, so a malformed member never creates one.
func Validate(req *protocol.HeartbeatRequest, pathMemberID string, cfg Config) (resp protocol.HeartbeatResponse, ok bool) {
	if req == nil {
		return reject(&protocol.HeartbeatRequest{MemberID: pathMemberID}, protocol.StatusInvalidRequest, cfg), false
	}
	switch {
	case !protocol.SupportsVersion(req.ProtocolVersion):
		return reject(req, protocol.StatusUnsupportedProtocol, cfg), false
	case req.MemberID != pathMemberID,
		protocol.ValidateMemberID(req.MemberID) != nil,
		strings.TrimSpace(req.RequestID) == "",
		req.RuntimeConsumerCapacity.RuntimeMaxConcurrency < 1,
		req.RuntimeConsumerCapacity.AvailableConcurrency < 0,
		req.MemberEpoch < protocol.EpochLeave:
		return reject(req, protocol.StatusInvalidRequest, cfg), false
	}
	return protocol.HeartbeatResponse{}, true
}

// RetryResponse answers RETRY without touching any group: the store is
// unavailable, the group failed closed, the coordinator is shutting down or
// overloaded. The member keeps its shards and heartbeats again after the
// normal interval; its lease bounds how long it reads without an OK.
func RetryResponse(req *protocol.HeartbeatRequest, cfg Config) protocol.HeartbeatResponse {
	return reject(req, protocol.StatusRetry, cfg)
}

// UnknownMemberResponse answers UNKNOWN_MEMBER_ID for a heartbeat naming an
// unknown stream, or an unknown group that is not registered on the fly
// (docs/protocol.md §6.1 step 2). The member stops reading and rejoins.
func UnknownMemberResponse(req *protocol.HeartbeatRequest, cfg Config) protocol.HeartbeatResponse {
	return reject(req, protocol.StatusUnknownMemberID, cfg)
}

// reject builds an answer that carries no group information: it echoes the
// request epoch, has zero group and assignment epochs and versions, an
// empty assignment, and the normal (always positive) intervals, because
// every client sleeps on heartbeatIntervalMs whatever the status.
func reject(req *protocol.HeartbeatRequest, status protocol.Status, cfg Config) protocol.HeartbeatResponse {
	cfg = cfg.EnsureDefaults()
	if req == nil {
		req = &protocol.HeartbeatRequest{}
	}
	return protocol.HeartbeatResponse{
		ResponseTo:          req.RequestID,
		Status:              status,
		MemberID:            req.MemberID,
		MemberEpoch:         req.MemberEpoch,
		HeartbeatIntervalMs: millis(cfg.HeartbeatInterval),
		RebalanceTimeoutMs:  millis(cfg.RebalanceTimeout),
		Assignment:          protocol.EmptyAssignment(0),
		MemberLeaseMs:       millis(cfg.MemberLease),
	}
}
