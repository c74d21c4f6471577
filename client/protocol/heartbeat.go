package protocol

import "time"

// Shard is a shard on the wire: {"shardIndex": 3}. In the assignedShards
// of an OK heartbeat answer it also carries OwnerEpoch (ours, optional on
// the wire); everywhere else OwnerEpoch is zero and left out, and a request
// may carry it (echoed by a client) without effect.
type Shard struct {
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
	ProtocolVersion int    `json:"protocolVersion"`
	RequestID       string `json:"requestId"`
	MemberID        string `json:"memberId"`
	MemberName      string `json:"memberName"`
	// MemberEpoch is 0 to join, -1 to leave, else the epoch of the last response.
	MemberEpoch             int64            `json:"memberEpoch"`
	MetadataVersion         int64            `json:"metadataVersion"`
	RuntimeConsumerCapacity ConsumerCapacity `json:"runtimeConsumerCapacity"`
	OwnedShards             []Shard          `json:"ownedShards"`
	RevokingShards          []RevokingShard  `json:"revokingShards"`
	ShardProgress           []ShardProgress  `json:"shardProgress"`
	// InstanceID (ours, optional) names the member's incarnation: 1–128
	// characters of [A-Za-z0-9._:-], random per process start, the same on
	// every heartbeat of that process. The coordinator stores the one of the
	// join that created the member and tells a replayed join from a second
	// process using the same member id by it. Empty means not sent
	// (reference clients): the join's requestId decides instead.
	InstanceID string `json:"instanceId,omitempty"`
	// WaitMs (ours, optional) lets the coordinator hold the answer up to
	// this many milliseconds (0 … the answered heartbeatIntervalMs) while
	// it would tell the member nothing new. 0 answers at once.
	WaitMs int64 `json:"waitMs,omitempty"`
}

// ConsumerCapacity is a member's local worker capacity.
type ConsumerCapacity struct {
	RuntimeMaxConcurrency int `json:"runtimeMaxConcurrency"`
	AvailableConcurrency  int `json:"availableConcurrency"`
}

// RevokingShard reports a shard the member is giving up.
type RevokingShard struct {
	Shard    Shard       `json:"shard"`
	State    RevokeState `json:"state"`
	InFlight int         `json:"inFlight"`
	AckedAt  *time.Time  `json:"ackedAt,omitempty"`
}

// Terminal reports whether the member has fully let go of the shard.
func (r RevokingShard) Terminal() bool { return r.State == RevokeRevoked && r.InFlight == 0 }

// ShardProgress is a member's consumption progress on one shard.
type ShardProgress struct {
	Shard           Shard     `json:"shard"`
	StreamKey       string    `json:"streamKey"`
	LastDeliveredID string    `json:"lastDeliveredId"`
	LastAckedID     string    `json:"lastAckedId"`
	PendingCount    int64     `json:"pendingCount"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

// HeartbeatResponse is the answer to every heartbeat (always HTTP 200).
type HeartbeatResponse struct {
	ResponseTo  string `json:"responseTo"`
	Status      Status `json:"status"`
	MemberID    string `json:"memberId"`
	MemberEpoch int64  `json:"memberEpoch"`
	// HeartbeatIntervalMs is always positive: clients sleep on it.
	HeartbeatIntervalMs int64 `json:"heartbeatIntervalMs"`
	// RebalanceTimeoutMs is always positive.
	RebalanceTimeoutMs int64      `json:"rebalanceTimeoutMs"`
	GroupEpoch         int64      `json:"groupEpoch"`
	AssignmentEpoch    int64      `json:"assignmentEpoch"`
	MetadataVersion    int64      `json:"metadataVersion"`
	Assignment         Assignment `json:"assignment"`
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
	AssignedShards  []Shard `json:"assignedShards"`
	PendingShards   []Shard `json:"pendingShards"`
	MetadataVersion int64   `json:"metadataVersion"`
}

// EmptyAssignment is an assignment with no shards, arrays present.
func EmptyAssignment(metadataVersion int64) Assignment {
	return Assignment{AssignedShards: []Shard{}, PendingShards: []Shard{}, MetadataVersion: metadataVersion}
}
