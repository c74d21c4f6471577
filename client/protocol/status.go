package protocol

// Status is the outcome of a heartbeat (docs/protocol.md §6).
type Status string

// Heartbeat statuses and what the member must do on each.
const (
	// StatusOK: own exactly the assigned shards.
	StatusOK Status = "OK"
	// StatusRetry: keep ownership and heartbeat again.
	StatusRetry Status = "RETRY"
	// StatusSyncMetadata: take the response's metadata version, keep only
	// shards already read that are assigned, revoke the rest, start nothing.
	StatusSyncMetadata Status = "SYNC_METADATA"
	// StatusRevokePending: keep owned assigned shards, keep draining, start nothing.
	StatusRevokePending Status = "REVOKE_PENDING"
	// StatusUnknownMemberID: stop reads and ACKs at once, rejoin with epoch 0.
	StatusUnknownMemberID Status = "UNKNOWN_MEMBER_ID"
	// StatusFencedMemberEpoch: stop reads and ACKs at once, rejoin with epoch 0.
	StatusFencedMemberEpoch Status = "FENCED_MEMBER_EPOCH"
	// StatusUnsupportedProtocol: stop and fail loudly.
	StatusUnsupportedProtocol Status = "UNSUPPORTED_PROTOCOL"
	// StatusInvalidRequest: stop and fail loudly.
	StatusInvalidRequest Status = "INVALID_REQUEST"
)

// MemberState is the lifecycle state of a group member.
type MemberState string

// Member states. Live members are STARTING or ACTIVE; owning members are live
// or LEAVING; EXPIRED and FENCED are terminal until the member rejoins.
const (
	MemberStarting MemberState = "STARTING"
	MemberActive   MemberState = "ACTIVE"
	MemberLeaving  MemberState = "LEAVING"
	MemberExpired  MemberState = "EXPIRED"
	MemberFenced   MemberState = "FENCED"
)

// Live reports whether a member in state s takes part in assignment.
func (s MemberState) Live() bool { return s == MemberActive || s == MemberStarting }

// Owning reports whether a member in state s may still hold shards.
func (s MemberState) Owning() bool { return s.Live() || s == MemberLeaving }

// GroupState is the assignment state of a consumer group.
type GroupState string

// Group states.
const (
	GroupEmpty       GroupState = "EMPTY"
	GroupAssigning   GroupState = "ASSIGNING"
	GroupReconciling GroupState = "RECONCILING"
	GroupStable      GroupState = "STABLE"
)

// RevokeState is a member's report on a shard it is giving up.
type RevokeState string

// Revoke states; a report is terminal when REVOKED with nothing in flight.
const (
	RevokeRevoking RevokeState = "REVOKING"
	RevokeDraining RevokeState = "DRAINING"
	RevokeRevoked  RevokeState = "REVOKED"
)

// MigrationState is the state of a resharding migration (docs/protocol.md §7).
type MigrationState string

// Migration states.
const (
	MigrationPreparing   MigrationState = "PREPARING"
	MigrationActive      MigrationState = "ACTIVE"
	MigrationDraining    MigrationState = "DRAINING"
	MigrationDeprecated  MigrationState = "DEPRECATED"
	MigrationRollingBack MigrationState = "ROLLING_BACK"
	MigrationRolledBack  MigrationState = "ROLLED_BACK"
)

// Member epochs with a special meaning in a heartbeat request.
const (
	// EpochJoin joins or rejoins the group.
	EpochJoin int64 = 0
	// EpochLeave leaves the group gracefully.
	EpochLeave int64 = -1
)
