package protocol

import "time"

// Shard is a shard on the wire: {"shardIndex": 3}.
type Shard struct {
	ShardIndex int `json:"shardIndex"`
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
