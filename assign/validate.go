package assign

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rscoord/rscoord/client/protocol"
)

// Validate runs docs/protocol.md §6.1 step 1 on a heartbeat that arrived on the
// path of member pathMemberID. A refusal means: answer it (HTTP 200, as
// every heartbeat) and do nothing else; the member will stop and fail
// loudly. Checked, in order: protocol version (UNSUPPORTED_PROTOCOL), then
// the problems heartbeatProblem lists (INVALID_REQUEST, with errorCode
// INVALID_REQUEST and a message naming the problem, §9.7). A request it
// accepts has its display texts clipped (heartbeatProblem).
//
// Validate needs no group: the coordinator runs it before looking the
// group up, so a malformed member never creates one.
func Validate(req *protocol.HeartbeatRequest, pathMemberID string) Refusal {
	if req == nil {
		return Invalid("no heartbeat body")
	}
	if !protocol.SupportsVersion(req.ProtocolVersion) {
		return Refusal{Status: protocol.StatusUnsupportedProtocol}
	}
	if problem := heartbeatProblem(req, pathMemberID); problem != "" {
		return Invalid(problem)
	}
	return Refusal{}
}

// heartbeatProblem says what makes req invalid, or "": the body's memberId
// not the path's or not a valid id, a blank requestId,
// runtimeMaxConcurrency < 1, availableConcurrency < 0, memberEpoch < -1, a
// malformed instanceId, or a requestId longer than protocol.MaxTextLength.
// Of a valid req it clips the display texts a group keeps, in memory and in
// the store (memberName, shard progress texts), to that length.
func heartbeatProblem(req *protocol.HeartbeatRequest, pathMemberID string) string {
	capacity := req.RuntimeConsumerCapacity
	switch {
	case req.MemberID != pathMemberID:
		return fmt.Sprintf("memberId %q in the body is not the path's %q", clip(req.MemberID), clip(pathMemberID))
	case protocol.ValidateMemberID(req.MemberID) != nil:
		return clip(protocol.ValidateMemberID(req.MemberID).Error())
	case strings.TrimSpace(req.RequestID) == "":
		return "requestId is blank"
	case capacity.RuntimeMaxConcurrency < 1:
		return fmt.Sprintf("runtimeConsumerCapacity.runtimeMaxConcurrency is %d; at least 1 is needed", capacity.RuntimeMaxConcurrency)
	case capacity.AvailableConcurrency < 0:
		return fmt.Sprintf("runtimeConsumerCapacity.availableConcurrency is %d; it cannot be negative", capacity.AvailableConcurrency)
	case req.MemberEpoch < protocol.EpochLeave:
		return fmt.Sprintf("memberEpoch is %d; the lowest is %d (leave)", req.MemberEpoch, protocol.EpochLeave)
	case req.RequestSeq < 0:
		return fmt.Sprintf("requestSeq is %d; it is positive, or 0 (not sent)", req.RequestSeq)
	}
	if req.InstanceID != "" {
		if err := protocol.ValidateInstanceID(req.InstanceID); err != nil {
			return clip(err.Error())
		}
	}
	// requestId is echoed (responseTo) and a join's is kept to tell a
	// replayed join: a shortened one would be another id, so a long one is
	// refused. The display texts a group keeps (memberName, progress) are
	// clipped instead (clipText): §6 bounds none of them, and
	// INVALID_REQUEST would stop a reference client for a name.
	if problem := tooLong("requestId", req.RequestID); problem != "" {
		return problem
	}
	req.MemberName = clipText(req.MemberName)
	// In place, without allocating: a heartbeat may report progress on
	// thousands of shards, and this runs on every one.
	for i := range req.ShardProgress {
		p := &req.ShardProgress[i]
		p.StreamKey, p.LastDeliveredID, p.LastAckedID = clipText(p.StreamKey), clipText(p.LastDeliveredID), clipText(p.LastAckedID)
	}
	return ""
}

// tooLong says that text field is longer than protocol.MaxTextLength, or
// is "".
func tooLong(field, value string) string {
	if len(value) <= protocol.MaxTextLength {
		return ""
	}
	return fmt.Sprintf("%s is %d bytes long; at most %d are allowed", field, len(value), protocol.MaxTextLength)
}

// clipText cuts a display text to at most protocol.MaxTextLength bytes, at
// a UTF-8 character boundary, so that what a group keeps stays bounded and
// valid text.
func clipText(s string) string {
	if len(s) <= protocol.MaxTextLength {
		return s
	}
	cut := protocol.MaxTextLength
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// clip shortens a text quoted back in a message, so that a huge value does
// not make a huge answer.
func clip(s string) string {
	const most = 160
	if len(s) <= most {
		return s
	}
	return s[:most] + "…"
}
