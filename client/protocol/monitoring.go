package protocol

import (
	"strconv"
	"strings"
	"time"
)

// Health answers GET /monitoring/health.
type Health struct {
	// Status is UP, DEGRADED or DOWN.
	Status string `json:"status"`
	// CoordinatorID names the answering coordinator process ("rscoord-"
	// and an id that changes with every start).
	CoordinatorID string `json:"coordinatorId"`
	// Redis is RedisDetail's status alone, a string as the reference
	// design sends it.
	Redis string `json:"redis"`
	// RedisDetail is UP, DOWN when a ping fails (Message says why), or
	// NOT_CONFIGURED without --redis.
	RedisDetail ComponentHealth `json:"redisDetail"`
	// Loop is LoopDetail's status alone, a string as the reference
	// design sends it.
	Loop string `json:"loop"`
	// LoopDetail is UP, or DOWN once shutdown began.
	LoopDetail ComponentHealth `json:"loopDetail"`
	// Store is UP, DEGRADED while groups failed closed (Message names
	// them), or DOWN when the store reports an error.
	Store ComponentHealth `json:"store"`
	// Replicas is, in cluster mode, the health of every replica the
	// answering one asked (itself included), each with its status, or
	// DOWN with why when it did not answer in time. Empty when the server
	// runs alone.
	Replicas []ReplicaHealth `json:"replicas,omitempty"`
}

// ReplicaHealth is one coordinator replica's part of a cluster-wide
// GET /monitoring/health.
type ReplicaHealth struct {
	// ID is the replica's id (--replica-id).
	ID string `json:"id"`
	// AdvertiseURL is the URL the replica is reached at (--advertise-url).
	AdvertiseURL string `json:"advertiseUrl"`
	// Status is the replica's own status, or DOWN when it did not answer.
	Status string `json:"status"`
	// Message names the replica's components that are not UP, or why it
	// did not answer; empty when all is well.
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
	// Status is UP, DEGRADED, DOWN or NOT_CONFIGURED.
	Status string `json:"status"`
	// Message says what is wrong, for people; absent when nothing is.
	Message string `json:"message,omitempty"`
}

// Session answers GET /monitoring/session.
type Session struct {
	// Authenticated is true for Basic or Bearer credentials; false with
	// authentication off, where every caller is the anonymous ADMIN.
	Authenticated bool `json:"authenticated"`
	// Username is the caller's user name ("anonymous" with
	// authentication off).
	Username string `json:"username"`
	// Roles are every role the caller holds, on every stream or only on
	// some, in the order of docs/protocol.md §4.
	Roles []string `json:"roles"`
}

// Compatibility answers GET /monitoring/compatibility.
type Compatibility struct {
	// CurrentCoordinationVersion is the protocol version this server
	// speaks now (CurrentVersion).
	CurrentCoordinationVersion int `json:"currentCoordinationVersion"`
	// SupportedCoordinationVersions are the protocolVersion values a
	// heartbeat may carry.
	SupportedCoordinationVersions VersionRange `json:"supportedCoordinationVersions"`
	// CoordinationVersions describes every supported version, ascending,
	// with its lifecycle and timing defaults, as the reference design does.
	CoordinationVersions []CoordinationVersionSupport `json:"coordinationVersions"`
	// CoordinationVersionNumbers lists every supported version, ascending.
	CoordinationVersionNumbers []int `json:"coordinationVersionNumbers"`
}

// CoordinationVersionSupport is the lifecycle of one protocol version.
type CoordinationVersionSupport struct {
	// Version is the protocolVersion value.
	Version int `json:"version"`
	// Status is ACTIVE while the version is served; DEPRECATED once a
	// removal is announced.
	Status string `json:"status"`
	// IntroducedIn is the release that first spoke the version.
	IntroducedIn ReleaseVersion `json:"introducedIn"`
	// DeprecatedIn is the release that deprecated it; null while it is not.
	DeprecatedIn *ReleaseVersion `json:"deprecatedIn"`
	// MinimumSupportedUntil is the release up to which it stays served.
	MinimumSupportedUntil ReleaseVersion `json:"minimumSupportedUntil"`
	// RemovedIn is the release that stops serving it; null while none is
	// planned.
	RemovedIn *ReleaseVersion `json:"removedIn"`
	// TimingDefaults are the member timings the version assumes when the
	// coordinator sends none.
	TimingDefaults TimingDefaults `json:"timingDefaults"`
}

// ReleaseVersion is a semantic version.
type ReleaseVersion struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
	Patch int `json:"patch"`
}

// TimingDefaults are durations in ISO 8601 form ("PT3S").
type TimingDefaults struct {
	HeartbeatInterval string `json:"heartbeatInterval"`
	MemberLeaseTTL    string `json:"memberLeaseTtl"`
	RebalanceTimeout  string `json:"rebalanceTimeout"`
}

// VersionRange is an inclusive range of protocol versions.
type VersionRange struct {
	// Min is the lowest version in the range.
	Min int `json:"min"`
	// Max is the highest version in the range.
	Max int `json:"max"`
}

// CurrentCompatibility describes the versions this build speaks.
func CurrentCompatibility() Compatibility {
	versions := []int{}
	support := []CoordinationVersionSupport{}
	for v := MinVersion; v <= MaxVersion; v++ {
		versions = append(versions, v)
		support = append(support, CoordinationVersionSupport{
			Version: v, Status: "ACTIVE",
			IntroducedIn: ReleaseVersion{0, 1, 0}, MinimumSupportedUntil: ReleaseVersion{1, 0, 0},
			TimingDefaults: TimingDefaults{
				HeartbeatInterval: isoSeconds(DefaultHeartbeatInterval), MemberLeaseTTL: isoSeconds(DefaultMemberLease),
				RebalanceTimeout: isoSeconds(DefaultRebalanceTimeout),
			},
		})
	}
	return Compatibility{
		CurrentCoordinationVersion:    CurrentVersion,
		SupportedCoordinationVersions: VersionRange{Min: MinVersion, Max: MaxVersion},
		CoordinationVersions:          support,
		CoordinationVersionNumbers:    versions,
	}
}

// isoSeconds writes d in whole seconds as an ISO 8601 duration.
func isoSeconds(d time.Duration) string {
	return "PT" + strconv.FormatInt(int64(d/time.Second), 10) + "S"
}

// GroupsResponse answers GET /monitoring/groups.
type GroupsResponse struct {
	// Groups are the groups the coordinator runs, sorted by stream and
	// group; a group that failed closed or did not answer in time is left
	// out.
	Groups []GroupResponse `json:"groups"`
	// Streams (ours) are the streams the coordinator runs, sorted by
	// prefix, those without any group included: a stream whose groups
	// were all deleted still has a layout, and maybe a migration, to show.
	Streams []StreamSummary `json:"streams"`
	// MissingReplicas is, in cluster mode, every replica whose groups are
	// missing from Groups because it did not answer in time; empty when
	// the list is whole.
	MissingReplicas []MissingReplica `json:"missingReplicas,omitempty"`
}

// StreamSummary is one stream in a [GroupsResponse].
type StreamSummary struct {
	StreamPrefix    string `json:"streamPrefix"`
	ShardCount      int    `json:"shardCount"`
	MetadataVersion int64  `json:"metadataVersion"`
	// ActiveMigration is the stream's migration in progress, or null.
	ActiveMigration *Migration `json:"activeMigration"`
}

// MissingReplica is a replica whose part of a cluster-wide list is
// missing (cluster mode): each replica lists only the groups it runs, and
// the replica asked gathers them from every other.
type MissingReplica struct {
	// ID is the replica's id (--replica-id).
	ID string `json:"id"`
	// AdvertiseURL is the URL the replica is reached at (--advertise-url).
	AdvertiseURL string `json:"advertiseUrl"`
	// Units are the placement units (stream/<prefix>) whose owner key it
	// holds: the streams whose groups are missing.
	Units []string `json:"units"`
	// Error says why it is missing.
	Error string `json:"error"`
}

// MembersResponse answers GET …/members.
type MembersResponse struct {
	// Members are the group's members by member id, terminal ones
	// included until the stale-member retention prunes them.
	Members []Member `json:"members"`
}

// Member describes one member of a group.
type Member struct {
	// MemberID is the member's id, also its Redis consumer name.
	MemberID string `json:"memberId"`
	// MemberName is the memberName it last sent.
	MemberName string `json:"memberName"`
	// State is the member's lifecycle state. A member whose lease passed
	// is dead whatever State says, until the coordinator expires it.
	State MemberState `json:"state"`
	// MemberEpoch is the member's epoch (raised when it is fenced or
	// expires); -1 while LEAVING, as its answers say.
	MemberEpoch int64 `json:"memberEpoch"`
	// MetadataVersion is the metadataVersion it last sent (the group's,
	// after a join).
	MetadataVersion int64 `json:"metadataVersion"`
	// RuntimeMaxConcurrency is its last reported worker count.
	RuntimeMaxConcurrency int `json:"runtimeMaxConcurrency"`
	// ActiveConsumerWorkers is how many of its workers were busy at its
	// last report: runtimeMaxConcurrency minus availableConcurrency, at
	// least 0.
	ActiveConsumerWorkers int `json:"activeConsumerWorkers"`
	// CurrentAssignment are the shards it last reported owning; a fenced
	// or expired member keeps them until they are released
	// (docs/protocol.md §9.1).
	CurrentAssignment []Shard `json:"currentAssignment"`
	// GrantedAssignment are the shards its last answer let it read. It may
	// read them before reporting them, so they are kept from other members
	// like its current ones.
	GrantedAssignment []Shard `json:"grantedAssignment"`
	// Revoking are the shards it reports giving up and has not yet
	// reported terminal.
	Revoking []Shard `json:"revoking"`
	// LastHeartbeatAt is when its last heartbeat was recorded; null until
	// it heartbeats to the coordinator that loaded the group (a restart,
	// a failover).
	LastHeartbeatAt *time.Time `json:"lastHeartbeatAt"`
	// MemberLeaseExpiresAt is when its lease ends without another
	// heartbeat; null when unknown (a terminal member loaded from the
	// store).
	MemberLeaseExpiresAt *time.Time `json:"memberLeaseExpiresAt"`
	// RebalanceTimeoutMs is the coordinator's rebalance timeout in
	// milliseconds, the same for every member.
	RebalanceTimeoutMs int64 `json:"rebalanceTimeoutMs"`
	// RebalanceDeadlineAt is set while it must give up shards it holds
	// outside its target: still holding them past it, it is fenced. Null
	// when there is none.
	RebalanceDeadlineAt *time.Time `json:"rebalanceDeadlineAt"`
	// ShardProgress is its last reported progress, by shard index. Not
	// durable: empty after a restart until it heartbeats.
	ShardProgress []ShardProgress `json:"shardProgress"`
	// InstanceID (ours) is the instanceId of the member's current
	// incarnation (docs/protocol.md §9.2), "" when it sends none.
	InstanceID string `json:"instanceId"`
	// ClientAddress (ours) is the address its last heartbeat came from:
	// the connection's, or the client a trusted proxy names
	// (--trusted-proxies); "" until it heartbeats to this coordinator.
	ClientAddress string `json:"clientAddress"`
	// UserAgent (ours) is its last heartbeat's User-Agent header.
	UserAgent string `json:"userAgent"`
	// Late (ours) is true for a live member whose last heartbeat is older
	// than two heartbeat intervals while its lease still runs.
	Late bool `json:"late"`
}

// AssignmentsResponse answers GET …/assignments. Maps are memberId → shards.
type AssignmentsResponse struct {
	// TargetAssignment is what the coordinator wants each live member to
	// hold; every live member is listed, [] when it gets nothing.
	TargetAssignment map[string][]Shard `json:"targetAssignment"`
	// CurrentAssignments is what each member last reported owning: live
	// and LEAVING members, and terminal ones still holding shards (they
	// may read until their lease lapses).
	CurrentAssignments map[string][]Shard `json:"currentAssignments"`
	// RevokeProgress is what each member is still giving up; members
	// giving up nothing are left out.
	RevokeProgress map[string][]Shard `json:"revokeProgress"`
	// InvariantViolations names, in words, every broken invariant of the
	// group (a shard granted to two members, say); empty when healthy.
	// Anything here is a coordinator bug.
	InvariantViolations []string `json:"invariantViolations"`
	// OwnerEpochs (ours) lists every shard that was ever granted with its
	// current ownership token (ownerEpoch), by shard index. The shards of
	// currentAssignments carry the same token while their member holds
	// the grant.
	OwnerEpochs []Shard `json:"ownerEpochs"`
}

// ConsumptionResponse answers GET …/consumption.
type ConsumptionResponse struct {
	// Progress lists every member's last reported progress, by member id
	// then shard. Not durable: empty after a restart until members
	// heartbeat.
	Progress []ConsumptionRow `json:"progress"`
}

// ConsumptionRow is one member's progress on one shard.
type ConsumptionRow struct {
	// StreamPrefix is the group's stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group.
	ConsumerGroup string `json:"consumerGroup"`
	// MemberID is the reporting member.
	MemberID string `json:"memberId"`
	// MemberName is the memberName it last sent.
	MemberName string `json:"memberName"`
	// MemberState is the member's state now.
	MemberState MemberState `json:"memberState"`
	// Shard is the shard the progress is on.
	Shard Shard `json:"shard"`
	// StreamKey is the key the member reported, or the shard's key when
	// it sent none.
	StreamKey string `json:"streamKey"`
	// LastDeliveredID is, as reported, the id of the last entry the
	// member read.
	LastDeliveredID string `json:"lastDeliveredId"`
	// LastAckedID is, as reported, the id of the last entry the member
	// acknowledged.
	LastAckedID string `json:"lastAckedId"`
	// PendingCount is, as reported, how many entries the member read and
	// has not acknowledged.
	PendingCount int64 `json:"pendingCount"`
	// UpdatedAt is the report's time, by the member's clock.
	UpdatedAt time.Time `json:"updatedAt"`
}

// MigrationsResponse answers GET …/migrations.
type MigrationsResponse struct {
	// Migrations are every migration of the stream, oldest first.
	Migrations []Migration `json:"migrations"`
	// ActiveReshardingID names the migration not yet DEPRECATED or
	// ROLLED_BACK; null when there is none.
	ActiveReshardingID *string `json:"activeReshardingId"`
}

// ShardsResponse answers GET …/shards (ours): every readable shard of the
// stream as Redis shows it now.
type ShardsResponse struct {
	// StreamPrefix is the stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group whose pending counts and lag are shown.
	ConsumerGroup string `json:"consumerGroup"`
	// ShardCount is the number of shards producers route to; draining
	// shards are not counted.
	ShardCount int `json:"shardCount"`
	// Shards are shards 0 … ShardCount−1, then the draining ones.
	Shards []ShardState `json:"shards"`
}

// ShardState is one shard stream, read live from Redis.
type ShardState struct {
	// ShardIndex is the shard's index.
	ShardIndex int `json:"shardIndex"`
	// StreamKey is the shard's Redis key.
	StreamKey string `json:"streamKey"`
	// RedisSlot is the Redis Cluster slot of StreamKey.
	RedisSlot int `json:"redisSlot"`
	// Draining is true for a removed shard of a scale-in not yet retired.
	Draining bool `json:"draining"`
	// Exists is false when the key is missing in Redis.
	Exists bool `json:"exists"`
	// Length is the number of entries in the stream; 0 when the key is
	// missing.
	Length int64 `json:"length"`
	// LastGeneratedID is the id of the newest entry ever added to the
	// stream; empty when the key is missing.
	LastGeneratedID string `json:"lastGeneratedId"`
	// FirstRecordID and LastRecordID are the ids of the oldest and newest
	// entries the stream holds; "" when it holds none.
	FirstRecordID string `json:"firstRecordId"`
	LastRecordID  string `json:"lastRecordId"`
	// GroupLastDeliveredID is the id of the last entry delivered to this
	// consumer group; "" when the key or the group is missing.
	GroupLastDeliveredID string `json:"groupLastDeliveredId"`
	// MemoryUsageBytes is what Redis last reported the key takes (MEMORY
	// USAGE, sampled by the background metrics collection); null until a
	// collection round read it, or for a missing key.
	MemoryUsageBytes *int64 `json:"memoryUsageBytes"`
	// Pending is how many entries this consumer group was delivered and
	// has not acknowledged; 0 when the key or the group's Redis consumer
	// group is missing.
	Pending int64 `json:"pending"`
	// Lag is how many entries this consumer group has not yet been
	// delivered; null when Redis cannot tell (entries deleted in between,
	// Redis 7.0) or the key or the group's Redis consumer group is missing.
	Lag *int64 `json:"lag"`
	// Owners are the members currently reporting the shard as owned.
	Owners []string `json:"owners"`
}

// OffsetsResponse answers GET …/offsets: where this consumer group stands
// on every readable shard.
type OffsetsResponse struct {
	// StreamPrefix is the stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group whose positions are shown.
	ConsumerGroup string `json:"consumerGroup"`
	// Offsets are the live shards by index, then the draining ones.
	Offsets []ShardOffset `json:"offsets"`
	// Shards are the same shards in the reference design's form, with
	// lengths, owners and memory; the totals below sum them.
	Shards []StreamShardOffset `json:"shards"`
	// TotalStreamLength sums the shards' lengths.
	TotalStreamLength int64 `json:"totalStreamLength"`
	// TotalPendingCount sums the shards' pending counts.
	TotalPendingCount int64 `json:"totalPendingCount"`
	// TotalLag sums the shards' lags; null when any lag is unknown.
	TotalLag *int64 `json:"totalLag"`
	// TotalMemoryUsageBytes sums the memory known of the shards.
	TotalMemoryUsageBytes int64 `json:"totalMemoryUsageBytes"`
	// MemoryUsageKnown is false when some shard's memory is unknown.
	MemoryUsageKnown bool `json:"memoryUsageKnown"`
}

// StreamShardOffset is one shard of one group in the reference design's
// monitoring form. Ids are null when unknown.
type StreamShardOffset struct {
	StreamPrefix  string `json:"streamPrefix"`
	ConsumerGroup string `json:"consumerGroup"`
	Shard         Shard  `json:"shard"`
	StreamKey     string `json:"streamKey"`
	// RedisSlot is the Redis Cluster slot of StreamKey.
	RedisSlot int `json:"redisSlot"`
	// RedisNodeEndpoint, RedisNodeID and the slot range name the Redis
	// Cluster node serving the slot; null: this server does not map
	// slots to nodes.
	RedisNodeEndpoint   *string `json:"redisNodeEndpoint"`
	RedisNodeID         *string `json:"redisNodeId"`
	RedisSlotRangeStart *int    `json:"redisSlotRangeStart"`
	RedisSlotRangeEnd   *int    `json:"redisSlotRangeEnd"`
	// StreamLength is XLEN; 0 for a missing key.
	StreamLength    int64   `json:"streamLength"`
	FirstRecordID   *string `json:"firstRecordId"`
	LastRecordID    *string `json:"lastRecordId"`
	LastGeneratedID *string `json:"lastGeneratedId"`
	// GroupLastDeliveredID is the Redis consumer group's last delivered id.
	GroupLastDeliveredID *string `json:"groupLastDeliveredId"`
	// ConsumerLastDeliveredID and ConsumerLastAckedID are what the member
	// owning the shard last reported reading and acknowledging.
	ConsumerLastDeliveredID *string `json:"consumerLastDeliveredId"`
	ConsumerLastAckedID     *string `json:"consumerLastAckedId"`
	PendingCount            int64   `json:"pendingCount"`
	// Lag is null when Redis cannot tell.
	Lag *int64 `json:"lag"`
	// MemoryUsageBytes is the sampled MEMORY USAGE; null when unknown.
	MemoryUsageBytes *int64 `json:"memoryUsageBytes"`
	// OwnerMemberIDs are the members reporting the shard as owned, sorted.
	OwnerMemberIDs []string `json:"ownerMemberIds"`
}

// ShardOffset is one consumer group's position on one shard.
type ShardOffset struct {
	// ShardIndex is the shard's index.
	ShardIndex int `json:"shardIndex"`
	// StreamKey is the shard's Redis key.
	StreamKey string `json:"streamKey"`
	// LastGeneratedID is the id of the newest entry ever added to the
	// stream; empty when the key is missing.
	LastGeneratedID string `json:"lastGeneratedId"`
	// LastDeliveredID is the id of the last entry delivered to this
	// consumer group; empty when the key or the group's Redis consumer
	// group is missing.
	LastDeliveredID string `json:"lastDeliveredId"`
	// EntriesRead is the consumer group's entries-read counter (XINFO
	// GROUPS); 0 when Redis does not know it or the group is missing.
	EntriesRead int64 `json:"entriesRead"`
	// Pending is how many entries this consumer group was delivered and
	// has not acknowledged; 0 when the key or the group is missing.
	Pending int64 `json:"pending"`
	// Lag is how many entries this consumer group has not yet been
	// delivered; null when Redis cannot tell or the key or the group is
	// missing.
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
	// StreamPrefix is the stream.
	StreamPrefix string `json:"streamPrefix"`
	// ConsumerGroup is the group of the path; entries are read without
	// it, so nothing is delivered or acknowledged.
	ConsumerGroup string `json:"consumerGroup"`
	// ShardIndex is the shard read.
	ShardIndex int `json:"shardIndex"`
	// StreamKey is the shard's Redis key.
	StreamKey string `json:"streamKey"`
	// Direction is FORWARD (oldest first) or BACKWARD (newest first).
	Direction string `json:"direction"`
	// Messages are at most limit entries after (FORWARD) or before
	// (BACKWARD) the cursor, or from the start or end without one, in
	// Direction's order.
	Messages []StreamMessage `json:"messages"`
	// NextCursor is the id of the page's last entry, to pass back as
	// cursor; null when no entry follows.
	NextCursor *string `json:"nextCursor"`
	// Shard is ShardIndex as the reference design sends it.
	Shard Shard `json:"shard"`
	// Limit is the page size asked for.
	Limit int `json:"limit"`
	// Records are Messages in the reference design's form.
	Records []StreamMessageRecord `json:"records"`
}

// StreamMessageRecord is one stream entry in the reference design's form.
type StreamMessageRecord struct {
	StreamPrefix  string         `json:"streamPrefix"`
	ConsumerGroup string         `json:"consumerGroup"`
	Shard         Shard          `json:"shard"`
	StreamKey     string         `json:"streamKey"`
	RecordID      string         `json:"recordId"`
	Fields        map[string]any `json:"fields"`
	// Payload is the value of the field "payload"; null without one.
	Payload *string `json:"payload"`
	// RecordTimestampMs and RecordTime are the milliseconds part of
	// RecordID; null when it does not parse.
	RecordTimestampMs *int64     `json:"recordTimestampMs"`
	RecordTime        *time.Time `json:"recordTime"`
}

// NewStreamMessageRecord describes entry m of shard shard in the
// reference design's form.
func NewStreamMessageRecord(prefix, group string, shard int, key string, m StreamMessage) StreamMessageRecord {
	r := StreamMessageRecord{StreamPrefix: prefix, ConsumerGroup: group, Shard: Shard{ShardIndex: shard}, StreamKey: key,
		RecordID: m.ID, Fields: m.Fields}
	if p, ok := m.Fields["payload"].(string); ok {
		r.Payload = &p
	}
	if ms, _, ok := strings.Cut(m.ID, "-"); ok {
		if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
			t := time.UnixMilli(v).UTC()
			r.RecordTimestampMs, r.RecordTime = &v, &t
		}
	}
	return r
}

// StreamMessage is one stream entry; field values are strings.
type StreamMessage struct {
	// ID is the entry id, "ms-seq".
	ID string `json:"id"`
	// Fields are the entry's field-value pairs; {} when it has none.
	Fields map[string]any `json:"fields"`
}

// MaxMessagesPage is the largest page of the messages endpoint.
const MaxMessagesPage = 1000
