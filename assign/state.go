package assign

import (
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Config holds the timing rules of one group. Zero fields are filled by
// [Config.EnsureDefaults] from the protocol defaults.
type Config struct {
	// HeartbeatInterval is answered when nothing is moving.
	HeartbeatInterval time.Duration
	// ReconcileInterval (ours) is answered while the member has pending
	// shards or holds shards outside its target.
	ReconcileInterval time.Duration
	// MemberLease is how long a member stays live without a heartbeat.
	MemberLease time.Duration
	// RebalanceTimeout bounds how long a member may hold shards outside its
	// target before it is fenced.
	RebalanceTimeout time.Duration
	// StaleMemberRetention is how long terminal members are kept.
	StaleMemberRetention time.Duration
	// MaxCorrectionStep bounds how far past the group's metadataVersion a
	// member may report a version (docs/protocol.md, bounded corrections):
	// a report further ahead is answered INVALID_REQUEST for that member
	// alone and changes nothing.
	MaxCorrectionStep int64
	// MaxMembers caps the members one group holds. At the cap a join
	// (epoch 0 of an unknown member id) first takes the place of the
	// terminal member that holds nothing and ended first; when there is
	// none it is answered RETRY with errorCode MEMBER_LIMIT_REACHED and
	// changes nothing. Known members are never refused by it.
	MaxMembers int
}

// EnsureDefaults returns c with every zero field set to its protocol default.
func (c Config) EnsureDefaults() Config {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = protocol.DefaultHeartbeatInterval
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = protocol.DefaultReconcileHeartbeatInterval
	}
	if c.MemberLease <= 0 {
		c.MemberLease = protocol.DefaultMemberLease
	}
	if c.RebalanceTimeout <= 0 {
		c.RebalanceTimeout = protocol.DefaultRebalanceTimeout
	}
	if c.StaleMemberRetention <= 0 {
		c.StaleMemberRetention = protocol.DefaultStaleMemberRetention
	}
	if c.MaxCorrectionStep <= 0 {
		c.MaxCorrectionStep = protocol.DefaultMaxCorrectionStep
	}
	if c.MaxMembers <= 0 {
		c.MaxMembers = protocol.DefaultMaxGroupMembers
	}
	return c
}

// Group is the whole state of one consumer group. Only the owning group
// actor touches it; functions of this package mutate it in place and say in
// their result whether the change must be persisted before anyone is told.
//
// Shard sets ([]int) are always sorted ascending and free of duplicates.
type Group struct {
	// StreamPrefix is the stream the group reads; its shards are the keys
	// "{StreamPrefix}:{index}".
	StreamPrefix string
	// Name is the consumer group name (also the Redis consumer group).
	Name string
	// State is EMPTY, RECONCILING or STABLE (docs/protocol.md §6.2), recomputed
	// after every durable change. STABLE implies nothing is blocked, which
	// the steady heartbeat relies on.
	State protocol.GroupState
	// GroupEpoch is bumped by every membership change (join, leave, expiry,
	// fencing, pruning) and by every layout change, so that a new target
	// always comes with a new member epoch.
	GroupEpoch int64
	// AssignmentEpoch is GroupEpoch as of the last assignment run.
	AssignmentEpoch int64
	// MetadataVersion is bumped by membership, assignment, layout and
	// migration changes, never by lease renewals or progress reports. A
	// metadata correction moves it past the highest version a member
	// reported (see correction.go).
	MetadataVersion int64
	// ShardCount is the number of shards producers route to: 0..ShardCount-1.
	ShardCount int
	// DrainingShards are removed shards (index >= ShardCount) that stay
	// readable and assigned until a scale-in proves them drained.
	DrainingShards []int
	// Members by member id.
	Members map[string]*Member
	// Target is the sticky assignment: member id → shards. Only live
	// members appear.
	Target map[string][]int
	// CorrectionOpen is true while a metadata correction round is open
	// (docs/protocol.md §6.1 step 4 and 9).
	CorrectionOpen bool
	// ActiveMigration is the stream migration this group is stepping
	// through, or nil.
	ActiveMigration *protocol.Migration
	// CreatedAt is when the group was registered.
	CreatedAt time.Time
	// OwnerEpochs is the ownership token of each shard, indexed by shard
	// index (docs/protocol.md, ownership tokens): raised each time the shard
	// is granted to a member that did not already hold it, never lowered,
	// kept across scale changes (the slice only grows) and, through a
	// [Tombstone], across delete and re-create. A missing entry or 0 means
	// never granted. Since a shard is granted to at most one member at a
	// time, the value is the token of its current grantee. Durable.
	OwnerEpochs []int64

	// nextTimer caches a lower bound of the earliest timer of the group
	// (lease expiry, rebalance deadline, prune), valid while timersKnown.
	// It lets a steady heartbeat skip the O(members) maintenance scan of
	// docs/protocol.md §6.1 step 3 until a timer may be due. It is derived, not
	// persisted: a loaded group has timersKnown false and the first call
	// ([Restore], normally) rescans.
	nextTimer   time.Time
	timersKnown bool
	// idx is the group's index (index.go): derived, not persisted, built
	// on first use and kept exact by the setters of op.
	idx *index
	// created is true for a group NewGroup made in this process; loaded
	// is true once Restore prepared any other group, one decoded from the
	// store, which may have gone back (a restored backup): a member may
	// then carry an epoch from a history this group no longer has.
	created, loaded bool
	// correctionCap is the highest metadataVersion a member's report may
	// move the group to in this process (correction.go): what a history
	// the store lost could have reached. 0 until set, by Restore or by the
	// first correction. Not durable.
	correctionCap int64
	// heldOut are the shards the assignor gives to nobody (holdout.go), a
	// sorted set. Not durable: a restart forgets the hold.
	heldOut []int
}

// NewGroup creates an EMPTY group named name on the stream streamPrefix with
// shards 0..shardCount-1, no members, GroupEpoch 0 and MetadataVersion 1.
// The caller persists it before answering anyone.
func NewGroup(streamPrefix, name string, shardCount int, now time.Time) *Group {
	if shardCount < 0 {
		shardCount = 0
	}
	return &Group{
		StreamPrefix:    streamPrefix,
		Name:            name,
		State:           protocol.GroupEmpty,
		MetadataVersion: 1,
		ShardCount:      shardCount,
		DrainingShards:  []int{},
		Members:         map[string]*Member{},
		Target:          map[string][]int{},
		CreatedAt:       now,
		timersKnown:     true,
		created:         true,
	}
}

// Withdrawal is a shard an answer told its member to give up: Version is the
// metadata version of the first answer that no longer gave it.
type Withdrawal struct {
	Shard   int
	Version int64
}

// Member is one member of a group as the coordinator sees it.
type Member struct {
	// ID is the member id (= its Redis consumer name).
	ID string
	// Name is the memberName it last reported (a service name, for display).
	Name string
	// State is the member's lifecycle state; live = ACTIVE or STARTING,
	// owning = live or LEAVING.
	State protocol.MemberState
	// Epoch is the member epoch last answered; PreviousEpoch the epoch the
	// member may still carry after a lost response (the one before, or the
	// one it last proved to hold). A LEAVING member keeps its last positive
	// epoch here (responses say -1), so that stored epochs never go down.
	//
	// Both are durable, but an answer that only moves a live member's
	// epoch up to the group's assignment epoch (an epoch catch-up) does not
	// make them a durable change: the stored record may hold older values
	// until the member is written for another reason, and a member loaded
	// from it is epoch-unconfirmed (see epochConfirmed).
	Epoch         int64
	PreviousEpoch int64
	// epochConfirmed is false for a member loaded from the store (the zero
	// value: whatever builds a Member from a record gets it), until this
	// incarnation of the coordinator has processed one heartbeat of it
	// with a positive epoch (or it joined or rejoined here). While false,
	// the coordinator may have answered the member an epoch that was never
	// written (an epoch catch-up), so a heartbeat above the stored epoch
	// and at most the group's assignment epoch is processed as current
	// (docs/protocol.md §6.1 step 5). Not durable.
	epochConfirmed bool
	// lastSeq is the highest requestSeq decided for the member's
	// incarnation (0: none, or a client that sends none). Not durable: a
	// request does not outlive the coordinator process that received it,
	// and a group loaded from the store starts at 0.
	lastSeq int64
	// MetadataVersion is the version the member last reported.
	MetadataVersion int64
	// MaxConcurrency and AvailableConcurrency are the member's last reported
	// worker capacity.
	MaxConcurrency       int
	AvailableConcurrency int
	// Current is the set of shards the member reported owning, accepted.
	Current []int
	// Revoking is the set of shards the member reported giving up and not
	// yet terminal.
	Revoking []int
	// Granted is the set of shards the last response let it read. The member
	// may be reading them before it reports them as owned, so Granted shards
	// block other members exactly like Current and Revoking ones.
	Granted []int
	// Withdrawn lists the held shards (in Current or Revoking) that an
	// answer no longer gave the member, each with the metadata version of
	// the first such answer. A report leaves out such a shard as released
	// only when it carries that version or a later one: it was sent after
	// the member heard it had to give the shard up. An older report (a late
	// copy, or one crossing that answer) proves nothing about the shard,
	// which stays in Revoking. Durable.
	Withdrawn []Withdrawal
	// JoinVersion is the metadata version of the answer to the join that
	// created the current incarnation. Its process carries that version or
	// a later one in every report, leaves included; a report carrying an
	// older one was sent by an earlier process under the same id (a copy
	// held up in the network) and changes nothing. 0: unknown (a record
	// written before the field existed). Durable.
	JoinVersion int64
	// JoinSeq is the requestSeq of the join that created the current
	// incarnation (0 when it sent none). Its process numbers its requests
	// in one rising sequence, so an epoch-0 request of the same instanceId
	// numbered below it is an earlier join attempt held up in the network:
	// it must not start a new incarnation and free what the member reads.
	// The last requestSeq decided is kept in memory only; this one
	// survives a restart. Durable.
	JoinSeq int64
	// Reported is true once the member heartbeated after its join; until
	// then an epoch-0 heartbeat is a replay of a lost join answer.
	Reported bool
	// Progress is the member's last reported per-shard progress. It is not
	// durable: a restart forgets it until the next heartbeat.
	Progress []protocol.ShardProgress
	// JoinedAt is when the member last joined or rejoined.
	JoinedAt time.Time
	// LastHeartbeat and LeaseExpiresAt are not durable: a restored group
	// gives every member a fresh lease (see [Restore]).
	LastHeartbeat  time.Time
	LeaseExpiresAt time.Time
	// RebalanceDeadline is set while the member holds shards outside its
	// target; past it the member is fenced. Zero means none.
	RebalanceDeadline time.Time
	// StateChangedAt is when State last changed; terminal members are
	// pruned StaleMemberRetention after it.
	StateChangedAt time.Time
	// InstanceID is the incarnation id (instanceId) sent by the join that
	// created the current incarnation; empty when that join sent none
	// (reference clients). Durable.
	InstanceID string
	// JoinRequestID is the requestId of the join that created the current
	// incarnation: for a member without InstanceID, an epoch-0 heartbeat
	// with this requestId is a replay of a lost join answer, any other one a
	// second process (answered RETRY). Durable.
	JoinRequestID string
	// ix is what the group's index last counted of the member.
	ix linked
	// ReadableUntil is when the member's last answer that let it read (OK,
	// SYNC_METADATA, REVOKE_PENDING) stops letting it read: that answer's
	// time plus the member lease. Until then the shards it holds stay
	// blocked, whatever its state (docs/protocol.md, the hand-off
	// invariant). Not durable: [Restore] sets it to now+MemberLease for
	// every member still holding shards, since the coordinator cannot know
	// when its answers reached the member.
	ReadableUntil time.Time
}
