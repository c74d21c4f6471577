package protocol

import "time"

// CreateRequest is the body of POST /streams/{p} and POST /streams/{p}/groups/{g}.
type CreateRequest struct {
	// InitialShardCount defaults to the server's default shard count when nil.
	InitialShardCount *int `json:"initialShardCount,omitempty"`
	// RequestedBy names who asks; required and non-blank: the audit log
	// records it.
	RequestedBy string `json:"requestedBy"`
	// Reason (optional) is recorded in the audit log.
	Reason string `json:"reason,omitempty"`
	// VersionFloor (ours, optional) makes what the request creates start
	// above it: the group's groupEpoch, assignmentEpoch and
	// metadataVersion, and the stream's layout version when the request
	// creates the stream. An import from another coordinator sets it to
	// the highest number that coordinator answered, so that clients
	// switched over never carry a number ahead of ours. 0 to
	// MaxVersionFloor; 0 is no floor.
	VersionFloor int64 `json:"versionFloor,omitempty"`
}

// MaxVersionFloor is the largest CreateRequest.VersionFloor: 2^53−1, the
// largest integer a JSON number keeps exactly in every client (JavaScript
// reads numbers as doubles), far below where counting up overflows.
const MaxVersionFloor int64 = 1<<53 - 1

// StreamResponse answers stream creation.
type StreamResponse struct {
	// StreamPrefix is the stream.
	StreamPrefix string `json:"streamPrefix"`
	// ShardCount is the stream's shard count.
	ShardCount int `json:"shardCount"`
	// MetadataVersion is the version of the stream's shard layout, not a
	// group's metadataVersion.
	MetadataVersion int64 `json:"metadataVersion"`
}

// GroupResponse describes one consumer group.
type GroupResponse struct {
	// StreamPrefix is the group's stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group's name, also its Redis consumer group.
	ConsumerGroup string `json:"consumerGroup"`
	// State is EMPTY (no live member), RECONCILING (some member does not
	// yet hold exactly its target) or STABLE.
	State GroupState `json:"state"`
	// GroupEpoch is raised by every membership or layout change; it never
	// goes down, also across a delete and re-create of the group.
	GroupEpoch int64 `json:"groupEpoch"`
	// AssignmentEpoch is the epoch of the current target assignment.
	AssignmentEpoch int64 `json:"assignmentEpoch"`
	// MetadataVersion is raised by membership, assignment, layout and
	// migration changes; it never goes down.
	MetadataVersion int64 `json:"metadataVersion"`
	// ShardCount is the number of shards producers route to; draining
	// shards are not counted.
	ShardCount int `json:"shardCount"`
	// ActiveMigration is the stream's migration in progress; null when
	// there is none.
	ActiveMigration *Migration `json:"activeMigration"`
	// TargetAssignmentSummary maps every live member to the number of
	// shards in its target.
	TargetAssignmentSummary map[string]int `json:"targetAssignmentSummary"`
	// CurrentAssignmentSummary maps every live or LEAVING member to the
	// number of shards it last reported owning.
	CurrentAssignmentSummary map[string]int `json:"currentAssignmentSummary"`
}

// DeleteGroupRequest is the body of DELETE /streams/{p}/groups/{g}.
type DeleteGroupRequest struct {
	// RequestedBy names who asks; required and non-blank: the audit log
	// records it.
	RequestedBy string `json:"requestedBy"`
	// Reason (optional) is recorded in the audit log.
	Reason string `json:"reason"`
	// Force deletes the group even while live members exist.
	Force bool `json:"force,omitempty"`
}

// DeleteStreamRequest is the body of DELETE /streams/{p} (ours).
type DeleteStreamRequest struct {
	// RequestedBy names who asks; required and non-blank: the audit log
	// records it.
	RequestedBy string `json:"requestedBy"`
	// Reason (optional) is recorded in the audit log.
	Reason string `json:"reason"`
	// Force deletes the stream's groups first, as a forced group delete
	// does, and drops an active migration with the stream.
	Force bool `json:"force,omitempty"`
	// DeleteKeys also deletes every shard key of the stream's widest
	// layout from Redis; without it the keys stay.
	DeleteKeys bool `json:"deleteKeys,omitempty"`
}

// DeleteStreamResponse answers DELETE /streams/{p} (ours).
type DeleteStreamResponse struct {
	StreamPrefix string `json:"streamPrefix"`
	// ShardCount is the shard count the stream had.
	ShardCount int `json:"shardCount"`
	// DeletedGroups names the groups deleted with the stream (force).
	DeletedGroups []string `json:"deletedGroups"`
	// DroppedMigration is the id of the active migration dropped with
	// the stream (force); empty when there was none.
	DroppedMigration string `json:"droppedMigration,omitempty"`
	// DeletedKeys are the shard keys deleted from Redis (deleteKeys).
	DeletedKeys []string `json:"deletedKeys"`
}

// ScaleRequest is the body of POST /streams/{p}/scale.
type ScaleRequest struct {
	// TargetShardCount is required; 0 is a valid target (retire every shard).
	TargetShardCount *int `json:"targetShardCount"`
	// RequestedBy names who asks; required and non-blank: the audit log
	// records it.
	RequestedBy string `json:"requestedBy"`
	// Reason (optional) is recorded in the audit log.
	Reason string `json:"reason"`
	// DeprecatedAfter (optional) keeps the migration ACTIVE, and so open
	// to rollback, at least until this time (besides the producer routing
	// lease).
	DeprecatedAfter *time.Time `json:"deprecatedAfter,omitempty"`
}

// ScaleResponse answers a stream-wide scale.
type ScaleResponse struct {
	// StreamPrefix is the stream scaled.
	StreamPrefix string `json:"streamPrefix"`
	// TargetShardCount is the shard count asked for.
	TargetShardCount int `json:"targetShardCount"`
	// AffectedConsumerGroups are every group of the stream, sorted: they
	// share the shard keys, so all of them take the new layout.
	AffectedConsumerGroups []string `json:"affectedConsumerGroups"`
	// Migrations holds the stream's one migration once per affected
	// group, in the same order; once when the stream has no group.
	Migrations []Migration `json:"migrations"`
}

// OperatorRequest is the body of rollback and complete.
type OperatorRequest struct {
	// RequestedBy names who asks; required and non-blank: the audit log
	// records it.
	RequestedBy string `json:"requestedBy"`
	// Reason (optional) is recorded in the audit log.
	Reason string `json:"reason"`
}

// NoopReshardingID names the migration answered for a scale to the current count.
const NoopReshardingID = "noop"

// Migration is one resharding of a stream, as seen by one group.
type Migration struct {
	// ReshardingID names the migration within its stream (rs-1, rs-2, …),
	// or is "noop" for a scale to the current count.
	ReshardingID string `json:"reshardingId"`
	// FromShardCount is the shard count before the scale.
	FromShardCount int `json:"fromShardCount"`
	// ToShardCount is the shard count the scale moves to.
	ToShardCount int `json:"toShardCount"`
	// State is where the migration stands (docs/protocol.md §7).
	State MigrationState `json:"state"`
	// CreatedAt is when the scale was first asked for.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the migration last changed: its state, or a
	// removed shard that retired.
	UpdatedAt time.Time `json:"updatedAt"`
	// Detail (ours, additive) says what the migration waits for or how it
	// ended: "redis not configured", the shards whose drain is not yet
	// proven, an operator's reason. Empty when there is nothing to say.
	Detail string `json:"detail,omitempty"`
}

// ProducerRoutingResponse tells a producer where keys go.
type ProducerRoutingResponse struct {
	// StreamPrefix is the stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group asked about.
	ConsumerGroup string `json:"consumerGroup"`
	// MetadataVersion is the group's metadata version: a producer that
	// sees a newer one refreshes its routing.
	MetadataVersion int64 `json:"metadataVersion"`
	// ShardCount is what [Route] takes: keys go to shards 0 …
	// ShardCount−1. It is 0 after a scale to 0: there is nowhere to
	// publish.
	ShardCount int `json:"shardCount"`
	// StreamKeyPattern is "{streamPrefix}:{shardIndex}", for display.
	StreamKeyPattern string `json:"streamKeyPattern"`
	// Shards are exactly shards 0 … ShardCount−1, never a draining one.
	Shards []RoutedShard `json:"shards"`
	// RoutingLeaseMs is the server's --producer-routing-lease: no removed
	// shard retires sooner than this after its scale-in activated, so a
	// producer must not write on routing older than this. A producer uses
	// the smaller of it and its own lease. 0 or absent: the server does not
	// say (an optional extension; reference producers ignore it).
	RoutingLeaseMs int64 `json:"routingLeaseMs,omitempty"`
}

// RoutedShard is one shard a producer may write to.
type RoutedShard struct {
	// ShardIndex is the shard's index.
	ShardIndex int `json:"shardIndex"`
	// StreamKey is the Redis key to XADD the shard's records to.
	StreamKey string `json:"streamKey"`
	// RedisSlot is the Redis Cluster slot of StreamKey.
	RedisSlot int `json:"redisSlot"`
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

// Where an offsets reset moves a group (OffsetsResetRequest.To).
const (
	ResetToEarliest = "EARLIEST" // before the first entry: everything is read again
	ResetToLatest   = "LATEST"   // the last entry: only entries added later are read
	ResetToTime     = "TIME"     // before the first entry added at or after Time
	ResetToID       = "ID"       // the entry ID: the entries after it are read next
)

// OffsetsResetRequest is the body of POST
// /streams/{p}/groups/{g}/offsets/reset (ours): where to move the group's
// last delivered id on the stream's shards.
type OffsetsResetRequest struct {
	RequestedBy string `json:"requestedBy"`
	Reason      string `json:"reason"`
	// To is EARLIEST, LATEST, TIME or ID.
	To string `json:"to"`
	// Time (RFC 3339) is the moment of TIME.
	Time string `json:"time,omitempty"`
	// ID is the entry id of ID.
	ID string `json:"id,omitempty"`
	// Shards limits the reset to these shard indexes; empty means every
	// readable shard.
	Shards []int `json:"shards,omitempty"`
	// Execute applies the reset; without it the answer is a dry run that
	// changes nothing.
	Execute bool `json:"execute,omitempty"`
	// Force makes an executed reset run under live members: the shards
	// are held out of the assignment, their readers hand them off, the
	// reset runs once nobody holds them, and the shards are given out
	// again. In a dry run it names the members it would make hand off.
	Force bool `json:"force,omitempty"`
}

// OffsetsResetResponse answers an offsets reset: each shard's last
// delivered id before and after (planned, in a dry run).
type OffsetsResetResponse struct {
	StreamPrefix  string `json:"streamPrefix"`
	ConsumerGroup string `json:"consumerGroup"`
	To            string `json:"to"`
	// Executed is false for a dry run.
	Executed bool          `json:"executed"`
	Shards   []OffsetReset `json:"shards"`
	// HandedOff are the members a forced reset made hand off the shards
	// (would make, in a dry run with force); empty without force.
	HandedOff []string `json:"handedOff"`
}

// OffsetReset is one shard of an offsets reset.
type OffsetReset struct {
	ShardIndex int    `json:"shardIndex"`
	StreamKey  string `json:"streamKey"`
	// CurrentLastDeliveredID is where the group stood ("" when the key
	// does not hold the group).
	CurrentLastDeliveredID string `json:"currentLastDeliveredId"`
	NewLastDeliveredID     string `json:"newLastDeliveredId"`
	// Owners are the members that read, or may still read, the shard:
	// while there is one, an executed reset is refused.
	Owners []string `json:"owners"`
}
