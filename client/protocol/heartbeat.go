package protocol

import "time"

// Shard is a shard on the wire: {"shardIndex": 3}. In the assignedShards
// of a heartbeat answer, and in the assignments view's currentAssignments
// and ownerEpochs, it also carries OwnerEpoch (ours, optional on the
// wire); everywhere else OwnerEpoch is zero and left out, and a request
// may carry it (echoed by a client) without effect.
type Shard struct {
	// ShardIndex is the zero-based shard number; the shard's Redis key is
	// "{streamPrefix}:{shardIndex}".
	ShardIndex int `json:"shardIndex"`
	// OwnerEpoch is the shard's ownership token (docs/protocol.md, ownership
	// tokens): a positive counter per (group, shard), raised each time the
	// shard is granted to a member that did not already hold it, never
	// decreasing. A downstream store that keeps the highest token seen per
	// shard can refuse a stale owner's writes. Zero means absent.
	OwnerEpoch int64 `json:"ownerEpoch,omitempty"`
}

// Shards turns shard indexes into wire shards; nil becomes [].
func Shards(indexes []int) []Shard {
	out := make([]Shard, len(indexes))
	for i, s := range indexes {
		out[i] = Shard{ShardIndex: s}
	}
	return out
}

// Indexes turns wire shards into shard indexes, in the order given.
func Indexes(shards []Shard) []int {
	out := make([]int, len(shards))
	for i, s := range shards {
		out[i] = s.ShardIndex
	}
	return out
}

// HeartbeatRequest is the body of POST …/members/{memberId}/heartbeat.
type HeartbeatRequest struct {
	// ProtocolVersion is the protocol version the member speaks (1); one
	// outside [MinVersion, MaxVersion] is answered UNSUPPORTED_PROTOCOL.
	ProtocolVersion int `json:"protocolVersion"`
	// RequestID names this request, non-blank, at most MaxTextLength
	// bytes; the answer echoes it as responseTo. A join's is kept to tell
	// a replayed join without instanceId (docs/protocol.md §9.2).
	RequestID string `json:"requestId"`
	// MemberID must equal the path's memberId. It is also the member's
	// Redis consumer name.
	MemberID string `json:"memberId"`
	// MemberName is a display name (a service name, say); monitoring shows
	// the last one sent, cut to MaxTextLength bytes.
	MemberName string `json:"memberName"`
	// MemberEpoch is 0 to join, -1 to leave, else the epoch of the last response.
	MemberEpoch int64 `json:"memberEpoch"`
	// MetadataVersion is the metadataVersion of the last answer, 0 on a join.
	MetadataVersion int64 `json:"metadataVersion"`
	// RuntimeConsumerCapacity is the member's worker capacity, shown in
	// monitoring; assignment does not use it (shards are balanced by count).
	RuntimeConsumerCapacity ConsumerCapacity `json:"runtimeConsumerCapacity"`
	// OwnedShards are the shards the member reads now. One outside the
	// member's authority fences it (docs/protocol.md §6.1 step 6); a
	// join's report is ignored.
	OwnedShards []Shard `json:"ownedShards"`
	// RevokingShards are the shards the member is giving up, with how far
	// it got; one not yet terminal is kept from other members.
	RevokingShards []RevokingShard `json:"revokingShards"`
	// ShardProgress is the member's consumption on each shard it holds,
	// for monitoring only (not durable). A shard outside the member's
	// authority fences it, as in OwnedShards.
	ShardProgress []ShardProgress `json:"shardProgress"`
	// InstanceID (ours, optional) names the member's incarnation: 1–128
	// characters of [A-Za-z0-9._:-], random per process start, the same on
	// every heartbeat of that process. The coordinator stores the one of the
	// join that created the member and tells a replayed join from a second
	// process using the same member id by it. Empty means not sent
	// (reference clients): the join's requestId decides instead.
	InstanceID string `json:"instanceId,omitempty"`
	// RequestSeq (ours, optional) orders the requests of one incarnation:
	// positive and strictly increasing over every heartbeat one process
	// (one instanceId) sends for a member id, retries included. A request
	// whose requestSeq is below the last one the coordinator decided
	// for that incarnation is late (held up in the network or the server
	// while a later one was decided) and is answered RETRY, changing
	// nothing: its report is older than what the member may read by now.
	// 0 means not sent (reference clients); without an instanceId it is
	// ignored (a restarted process could not be told from a late one).
	RequestSeq int64 `json:"requestSeq,omitempty"`
	// WaitMs (ours, optional) lets the coordinator hold the answer up to
	// this many milliseconds (0 … the answered heartbeatIntervalMs) while
	// it would tell the member nothing new. 0 answers at once.
	WaitMs int64 `json:"waitMs,omitempty"`
}

// ConsumerCapacity is a member's local worker capacity.
type ConsumerCapacity struct {
	// RuntimeMaxConcurrency is the member's worker count, at least 1. It is
	// one member's capacity and never creates members (docs/protocol.md §8).
	RuntimeMaxConcurrency int `json:"runtimeMaxConcurrency"`
	// AvailableConcurrency is how many of those workers are idle now, at
	// least 0; monitoring shows the difference as active workers.
	AvailableConcurrency int `json:"availableConcurrency"`
}

// RevokingShard reports a shard the member is giving up.
type RevokingShard struct {
	// Shard is the shard being given up.
	Shard Shard `json:"shard"`
	// State is REVOKING, DRAINING or REVOKED.
	State RevokeState `json:"state"`
	// InFlight is the number of the shard's records still in the member's
	// handlers. REVOKED with InFlight 0 is terminal: the member let go.
	InFlight int `json:"inFlight"`
	// AckedAt (optional) is when the member let go. Informational: the
	// coordinator does not use it and ignores one that does not parse.
	AckedAt *time.Time `json:"ackedAt,omitempty"`
}

// Terminal reports whether the member has fully let go of the shard.
func (r RevokingShard) Terminal() bool { return r.State == RevokeRevoked && r.InFlight == 0 }

// ShardProgress is a member's consumption progress on one shard.
type ShardProgress struct {
	// Shard is the shard the progress is on.
	Shard Shard `json:"shard"`
	// StreamKey is the shard's Redis key (kept cut to MaxTextLength bytes).
	StreamKey string `json:"streamKey"`
	// LastDeliveredID is the id of the last entry the member read from the
	// shard (kept cut to MaxTextLength bytes).
	LastDeliveredID string `json:"lastDeliveredId"`
	// LastAckedID is the id of the last entry the member acknowledged
	// (kept cut to MaxTextLength bytes).
	LastAckedID string `json:"lastAckedId"`
	// PendingCount is how many entries the member read and has not yet
	// acknowledged, as the member counts them.
	PendingCount int64 `json:"pendingCount"`
	// UpdatedAt is when the member last saw progress, by its clock.
	// Informational: a time that does not parse is ignored (the zero time).
	UpdatedAt time.Time `json:"updatedAt"`
}

// HeartbeatResponse is the answer to every heartbeat (always HTTP 200).
type HeartbeatResponse struct {
	// ResponseTo is the request's requestId.
	ResponseTo string `json:"responseTo"`
	// Status says what the member must do (docs/protocol.md §6).
	Status Status `json:"status"`
	// MemberID is the member the answer is for.
	MemberID string `json:"memberId"`
	// MemberEpoch is the epoch to carry on the next heartbeat, unless
	// Status makes the member rejoin with 0; -1 in a leave's answer.
	// Answers carrying no group state echo the request's.
	MemberEpoch int64 `json:"memberEpoch"`
	// HeartbeatIntervalMs is always positive: clients sleep on it.
	HeartbeatIntervalMs int64 `json:"heartbeatIntervalMs"`
	// RebalanceTimeoutMs is always positive.
	RebalanceTimeoutMs int64 `json:"rebalanceTimeoutMs"`
	// GroupEpoch is the group's epoch, raised by every membership or
	// layout change; 0 in answers carrying no group state (RETRY,
	// UNKNOWN_MEMBER_ID, INVALID_REQUEST, UNSUPPORTED_PROTOCOL).
	GroupEpoch int64 `json:"groupEpoch"`
	// AssignmentEpoch is the epoch of the group's target assignment; 0 in
	// answers carrying no group state.
	AssignmentEpoch int64 `json:"assignmentEpoch"`
	// MetadataVersion is the group's metadata version, which the member
	// sends back on its next heartbeat; 0 in answers carrying no group
	// state.
	MetadataVersion int64 `json:"metadataVersion"`
	// Assignment is what the member may read; its shard lists are empty
	// unless Status is OK, SYNC_METADATA or REVOKE_PENDING.
	Assignment Assignment `json:"assignment"`
	// MemberLeaseMs (ours) is the coordinator's member lease: a member fails
	// closed at the smaller of its own setting and this value
	// (docs/protocol.md §9.4), so never later than this long without an
	// answer that lets it read. Present on every answer of a server speaking
	// our extensions; zero (absent) from others.
	MemberLeaseMs int64 `json:"memberLeaseMs,omitempty"`
	// ErrorCode (ours, optional) says why a heartbeat was refused, in the
	// codes of error bodies: on UNKNOWN_MEMBER_ID, STREAM_NOT_FOUND when the
	// stream does not exist and GROUP_NOT_FOUND when the group does not (and
	// is not registered on the fly), absent when only the member is unknown;
	// on RETRY, MEMBER_ID_IN_USE when another live process holds the member
	// id and MEMBER_LIMIT_REACHED when the group holds the most members the
	// coordinator allows, absent on other RETRYs; on INVALID_REQUEST,
	// INVALID_REQUEST with Message saying what. Clients that know it can
	// stop retrying a join that can never succeed; reference clients ignore
	// it.
	ErrorCode ErrorCode `json:"errorCode,omitempty"`
	// Message (ours, optional) explains ErrorCode for people.
	Message string `json:"message,omitempty"`
}

// Assignment is what a member may read (assigned) and what it will get once
// other members let go (pending).
type Assignment struct {
	// AssignedShards are the shards the member may read, each with its
	// ownerEpoch (docs/protocol.md §9.3).
	AssignedShards []Shard `json:"assignedShards"`
	// PendingShards are shards of the member's target that another member
	// still holds: not readable yet, assigned once released.
	PendingShards []Shard `json:"pendingShards"`
	// MetadataVersion is the same as the answer's metadataVersion.
	MetadataVersion int64 `json:"metadataVersion"`
}

// EmptyAssignment is an assignment with no shards, arrays present.
func EmptyAssignment(metadataVersion int64) Assignment {
	return Assignment{AssignedShards: []Shard{}, PendingShards: []Shard{}, MetadataVersion: metadataVersion}
}
