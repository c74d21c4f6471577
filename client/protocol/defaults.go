package protocol

import "time"

// Timing defaults of docs/protocol.md §6. The server exposes each as a flag.
const (
	// DefaultHeartbeatInterval is how often a member heartbeats when nothing moves.
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultMemberLease is how long a member keeps its assignment without a
	// successful heartbeat, on both sides: the server expires it, the member
	// stops reading (fail closed).
	DefaultMemberLease = 15 * time.Second
	// DefaultRebalanceTimeout bounds how long a member may hold shards outside
	// its target before it is fenced.
	DefaultRebalanceTimeout = 60 * time.Second
	// DefaultStaleMemberRetention is how long terminal members (EXPIRED,
	// FENCED, drained LEAVING) stay visible before they are pruned.
	DefaultStaleMemberRetention = 10 * time.Minute
	// DefaultReconcileHeartbeatInterval (ours) is the short interval answered
	// while a member has pending shards or holds shards outside its target, so
	// hand-offs take round trips instead of heartbeat intervals.
	DefaultReconcileHeartbeatInterval = 200 * time.Millisecond
	// DefaultMaxCorrectionStep (ours) bounds how far one metadata
	// correction may move a group's metadataVersion past its own: a member
	// reporting a version further ahead is answered INVALID_REQUEST alone,
	// so that no single request can exhaust the group's version space.
	DefaultMaxCorrectionStep int64 = 1_000_000
	// DefaultProducerRoutingLease is how long a producer may publish on cached
	// routing without a successful refresh.
	DefaultProducerRoutingLease = 30 * time.Second
	// DefaultProducerRefreshInterval is how often a producer refreshes routing.
	DefaultProducerRefreshInterval = 5 * time.Second
	// DefaultShardCount is the shard count of a stream created without one.
	DefaultShardCount = 4
)

// DefaultMaxGroupMembers (ours) is how many members one group may hold
// (live, leaving, and terminal ones kept for the stale-member retention):
// a join past it is answered RETRY with errorCode MEMBER_LIMIT_REACHED and
// changes nothing. A member's state lives in memory and in every durable
// write of its group, so the cap bounds both.
const DefaultMaxGroupMembers = 10_000

// MaxShardCount is the largest shard count a stream may have.
const MaxShardCount = 100_000
