package protocol

import "time"

// CreateRequest is the body of POST /streams/{p} and POST /streams/{p}/groups/{g}.
type CreateRequest struct {
	// InitialShardCount defaults to the server's default shard count when nil.
	InitialShardCount *int   `json:"initialShardCount,omitempty"`
	RequestedBy       string `json:"requestedBy"`
	Reason            string `json:"reason,omitempty"`
}

// StreamResponse answers stream creation.
type StreamResponse struct {
	StreamPrefix    string `json:"streamPrefix"`
	ShardCount      int    `json:"shardCount"`
	MetadataVersion int64  `json:"metadataVersion"`
}

// GroupResponse describes one consumer group.
type GroupResponse struct {
	StreamPrefix             string         `json:"streamPrefix"`
	ConsumerGroup            string         `json:"consumerGroup"`
	State                    GroupState     `json:"state"`
	GroupEpoch               int64          `json:"groupEpoch"`
	AssignmentEpoch          int64          `json:"assignmentEpoch"`
	MetadataVersion          int64          `json:"metadataVersion"`
	ShardCount               int            `json:"shardCount"`
	ActiveMigration          *Migration     `json:"activeMigration"`
	TargetAssignmentSummary  map[string]int `json:"targetAssignmentSummary"`
	CurrentAssignmentSummary map[string]int `json:"currentAssignmentSummary"`
}

// DeleteGroupRequest is the body of DELETE /streams/{p}/groups/{g}.
type DeleteGroupRequest struct {
	RequestedBy string `json:"requestedBy"`
	Reason      string `json:"reason"`
	// Force deletes the group even while live members exist.
	Force bool `json:"force,omitempty"`
}

// ScaleRequest is the body of POST /streams/{p}/scale.
type ScaleRequest struct {
	// TargetShardCount is required; 0 is a valid target (retire every shard).
	TargetShardCount *int       `json:"targetShardCount"`
	RequestedBy      string     `json:"requestedBy"`
	Reason           string     `json:"reason"`
	DeprecatedAfter  *time.Time `json:"deprecatedAfter,omitempty"`
}

// ScaleResponse answers a stream-wide scale.
type ScaleResponse struct {
	StreamPrefix           string      `json:"streamPrefix"`
	TargetShardCount       int         `json:"targetShardCount"`
	AffectedConsumerGroups []string    `json:"affectedConsumerGroups"`
	Migrations             []Migration `json:"migrations"`
}

// OperatorRequest is the body of rollback and complete.
type OperatorRequest struct {
	RequestedBy string `json:"requestedBy"`
	Reason      string `json:"reason"`
}

// NoopReshardingID names the migration answered for a scale to the current count.
const NoopReshardingID = "noop"

// Migration is one resharding of a stream, as seen by one group.
type Migration struct {
	ReshardingID   string         `json:"reshardingId"`
	FromShardCount int            `json:"fromShardCount"`
	ToShardCount   int            `json:"toShardCount"`
	State          MigrationState `json:"state"`
	CreatedAt      time.Time      `json:"createdAt"`
	UpdatedAt      time.Time      `json:"updatedAt"`
	// Detail (ours, additive) says what the migration waits for or how it
	// ended: "redis not configured", the shards whose drain is not yet
	// proven, an operator's reason. Empty when there is nothing to say.
	Detail string `json:"detail,omitempty"`
}

// ProducerRoutingResponse tells a producer where keys go.
type ProducerRoutingResponse struct {
	StreamPrefix     string        `json:"streamPrefix"`
	ConsumerGroup    string        `json:"consumerGroup"`
	MetadataVersion  int64         `json:"metadataVersion"`
	ShardCount       int           `json:"shardCount"`
	StreamKeyPattern string        `json:"streamKeyPattern"`
	Shards           []RoutedShard `json:"shards"`
}

// RoutedShard is one shard a producer may write to.
type RoutedShard struct {
	ShardIndex int    `json:"shardIndex"`
	StreamKey  string `json:"streamKey"`
	RedisSlot  int    `json:"redisSlot"`
}

// NewProducerRouting lists shards 0..shardCount-1 of prefix for group.
func NewProducerRouting(prefix, group string, shardCount int, metadataVersion int64) ProducerRoutingResponse {
	shards := make([]RoutedShard, shardCount)
	for i := range shards {
		key := StreamKey(prefix, i)
		shards[i] = RoutedShard{ShardIndex: i, StreamKey: key, RedisSlot: RedisSlot(key)}
	}
	return ProducerRoutingResponse{
		StreamPrefix:     prefix,
		ConsumerGroup:    group,
		MetadataVersion:  metadataVersion,
		ShardCount:       shardCount,
		StreamKeyPattern: StreamKeyPattern(prefix),
		Shards:           shards,
	}
}
