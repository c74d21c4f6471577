package protocol

import "time"

// Health answers GET /monitoring/health.
type Health struct {
	// Status is UP, DEGRADED or DOWN.
	Status        string          `json:"status"`
	CoordinatorID string          `json:"coordinatorId"`
	Redis         ComponentHealth `json:"redis"`
	Loop          ComponentHealth `json:"loop"`
	Store         ComponentHealth `json:"store"`
	// Replicas is, in cluster mode, the health of every replica the
	// answering one asked (itself included), each with its status, or
	// DOWN with why when it did not answer in time. Empty when the server
	// runs alone.
	Replicas []ReplicaHealth `json:"replicas,omitempty"`
}

// ReplicaHealth is one coordinator replica's part of a cluster-wide
// GET /monitoring/health.
type ReplicaHealth struct {
	ID           string `json:"id"`
	AdvertiseURL string `json:"advertiseUrl"`
	// Status is the replica's own status, or DOWN when it did not answer.
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Health statuses.
const (
	HealthUp       = "UP"
	HealthDegraded = "DEGRADED"
	HealthDown     = "DOWN"
	// HealthNotConfigured marks a component that is not set up (Redis without --redis).
	HealthNotConfigured = "NOT_CONFIGURED"
)

// ComponentHealth is the health of one part of the server.
type ComponentHealth struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Session answers GET /monitoring/session.
type Session struct {
	Authenticated bool     `json:"authenticated"`
	Username      string   `json:"username"`
	Roles         []string `json:"roles"`
}

// Compatibility answers GET /monitoring/compatibility.
type Compatibility struct {
	CurrentCoordinationVersion    int          `json:"currentCoordinationVersion"`
	SupportedCoordinationVersions VersionRange `json:"supportedCoordinationVersions"`
	CoordinationVersions          []int        `json:"coordinationVersions"`
}

// VersionRange is an inclusive range of protocol versions.
type VersionRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// CurrentCompatibility describes the versions this build speaks.
func CurrentCompatibility() Compatibility {
	versions := []int{}
	for v := MinVersion; v <= MaxVersion; v++ {
		versions = append(versions, v)
	}
	return Compatibility{
		CurrentCoordinationVersion:    CurrentVersion,
		SupportedCoordinationVersions: VersionRange{Min: MinVersion, Max: MaxVersion},
		CoordinationVersions:          versions,
	}
}

// GroupsResponse answers GET /monitoring/groups.
type GroupsResponse struct {
	Groups []GroupResponse `json:"groups"`
	// MissingReplicas is, in cluster mode, every replica whose groups are
	// missing from Groups because it did not answer in time; empty when
	// the list is whole.
	MissingReplicas []MissingReplica `json:"missingReplicas,omitempty"`
}

// MissingReplica is a replica whose part of a cluster-wide list is
// missing (cluster mode): each replica lists only the groups it runs, and
// the replica asked gathers them from every other.
type MissingReplica struct {
	ID           string `json:"id"`
	AdvertiseURL string `json:"advertiseUrl"`
	// Units are the placement units (stream/<prefix>) whose owner key it
	// holds: the streams whose groups are missing.
	Units []string `json:"units"`
	// Error says why it is missing.
	Error string `json:"error"`
}

// MembersResponse answers GET …/members.
type MembersResponse struct {
	Members []Member `json:"members"`
}

// Member describes one member of a group.
type Member struct {
	MemberID              string          `json:"memberId"`
	MemberName            string          `json:"memberName"`
	State                 MemberState     `json:"state"`
	MemberEpoch           int64           `json:"memberEpoch"`
	MetadataVersion       int64           `json:"metadataVersion"`
	RuntimeMaxConcurrency int             `json:"runtimeMaxConcurrency"`
	ActiveConsumerWorkers int             `json:"activeConsumerWorkers"`
	CurrentAssignment     []Shard         `json:"currentAssignment"`
	GrantedAssignment     []Shard         `json:"grantedAssignment"`
	Revoking              []Shard         `json:"revoking"`
	LastHeartbeatAt       *time.Time      `json:"lastHeartbeatAt"`
	MemberLeaseExpiresAt  *time.Time      `json:"memberLeaseExpiresAt"`
	RebalanceTimeoutMs    int64           `json:"rebalanceTimeoutMs"`
	RebalanceDeadlineAt   *time.Time      `json:"rebalanceDeadlineAt"`
	ShardProgress         []ShardProgress `json:"shardProgress"`
}

// AssignmentsResponse answers GET …/assignments. Maps are memberId → shards.
type AssignmentsResponse struct {
	TargetAssignment    map[string][]Shard `json:"targetAssignment"`
	CurrentAssignments  map[string][]Shard `json:"currentAssignments"`
	RevokeProgress      map[string][]Shard `json:"revokeProgress"`
	InvariantViolations []string           `json:"invariantViolations"`
	// OwnerEpochs (ours) lists every shard that was ever granted with its
	// current ownership token (ownerEpoch), by shard index. The shards of
	// currentAssignments carry the same token while their member holds
	// the grant.
	OwnerEpochs []Shard `json:"ownerEpochs"`
}

// ConsumptionResponse answers GET …/consumption.
type ConsumptionResponse struct {
	Progress []ConsumptionRow `json:"progress"`
}

// ConsumptionRow is one member's progress on one shard.
type ConsumptionRow struct {
	StreamPrefix    string      `json:"streamPrefix"`
	ConsumerGroup   string      `json:"consumerGroup"`
	MemberID        string      `json:"memberId"`
	MemberName      string      `json:"memberName"`
	MemberState     MemberState `json:"memberState"`
	Shard           Shard       `json:"shard"`
	StreamKey       string      `json:"streamKey"`
	LastDeliveredID string      `json:"lastDeliveredId"`
	LastAckedID     string      `json:"lastAckedId"`
	PendingCount    int64       `json:"pendingCount"`
	UpdatedAt       time.Time   `json:"updatedAt"`
}

// MigrationsResponse answers GET …/migrations.
type MigrationsResponse struct {
	Migrations         []Migration `json:"migrations"`
	ActiveReshardingID *string     `json:"activeReshardingId"`
}

// ShardsResponse answers GET …/shards (ours): every readable shard of the
// stream as Redis shows it now.
type ShardsResponse struct {
	StreamPrefix  string       `json:"streamPrefix"`
	ConsumerGroup string       `json:"consumerGroup"`
	ShardCount    int          `json:"shardCount"`
	Shards        []ShardState `json:"shards"`
}

// ShardState is one shard stream, read live from Redis.
type ShardState struct {
	ShardIndex int    `json:"shardIndex"`
	StreamKey  string `json:"streamKey"`
	RedisSlot  int    `json:"redisSlot"`
	// Draining is true for a removed shard of a scale-in not yet retired.
	Draining bool `json:"draining"`
	// Exists is false when the key is missing in Redis.
	Exists          bool   `json:"exists"`
	Length          int64  `json:"length"`
	LastGeneratedID string `json:"lastGeneratedId"`
	// Pending and Lag are those of this consumer group on the shard; Lag is
	// null when Redis cannot tell (entries deleted in between, Redis 7.0).
	Pending int64  `json:"pending"`
	Lag     *int64 `json:"lag"`
	// Owners are the members currently reporting the shard as owned.
	Owners []string `json:"owners"`
}

// OffsetsResponse answers GET …/offsets: where this consumer group stands
// on every readable shard.
type OffsetsResponse struct {
	StreamPrefix  string        `json:"streamPrefix"`
	ConsumerGroup string        `json:"consumerGroup"`
	Offsets       []ShardOffset `json:"offsets"`
}

// ShardOffset is one consumer group's position on one shard.
type ShardOffset struct {
	ShardIndex      int    `json:"shardIndex"`
	StreamKey       string `json:"streamKey"`
	LastGeneratedID string `json:"lastGeneratedId"`
	LastDeliveredID string `json:"lastDeliveredId"`
	EntriesRead     int64  `json:"entriesRead"`
	Pending         int64  `json:"pending"`
	// Lag is null when Redis cannot tell.
	Lag *int64 `json:"lag"`
}

// Directions of GET …/shards/{shardIndex}/messages.
const (
	DirectionForward  = "FORWARD"
	DirectionBackward = "BACKWARD"
)

// MessagesResponse answers GET …/shards/{shardIndex}/messages: one page of
// a shard stream's entries, for dashboards. NextCursor is null on the last
// page; pass it back as cursor for the next one.
type MessagesResponse struct {
	StreamPrefix  string          `json:"streamPrefix"`
	ConsumerGroup string          `json:"consumerGroup"`
	ShardIndex    int             `json:"shardIndex"`
	StreamKey     string          `json:"streamKey"`
	Direction     string          `json:"direction"`
	Messages      []StreamMessage `json:"messages"`
	NextCursor    *string         `json:"nextCursor"`
}

// StreamMessage is one stream entry; field values are strings.
type StreamMessage struct {
	ID     string         `json:"id"`
	Fields map[string]any `json:"fields"`
}

// MaxMessagesPage is the largest page of the messages endpoint.
const MaxMessagesPage = 1000
