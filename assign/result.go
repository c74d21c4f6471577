package assign

import (
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Result is what one call did to a group, in the order the group actor must
// act on it (raft's Ready): persist the group if Persist, then send
// Response, then schedule [Tick] at Next.
type Result struct {
	// Response answers the heartbeat. It is the zero value for [Tick],
	// [Restore] and [SetLayout], which answer nobody.
	Response protocol.HeartbeatResponse
	// Persist is true when something durable changed (anything but leases,
	// last-heartbeat times, progress, capacity, the member's reported
	// metadata version and an epoch catch-up). The group must be written,
	// synced, before Response leaves the actor: a response never tells a
	// member anything that a restart could forget, with one exception: an
	// answer that only moves a live member's epoch up to the group's
	// assignment epoch is not Persist for that reason (see catchUp; a
	// restart accepts the forgotten epoch). A steady heartbeat of a STABLE
	// group is false.
	Persist bool
	// Next is the earliest time [Tick] must run: a lease expiry, a rebalance
	// deadline or a prune. It may be early (Tick then finds nothing to do and
	// says when to come back), never late. Zero means no timer is pending.
	Next time.Time
	// Events says what happened, for metrics and logs; this package logs
	// nothing itself.
	Events Events
	// Changes lists which durable parts of the group changed, so that the
	// actor writes only those. Persist is true exactly when Changes is not
	// empty.
	Changes Changes
}

// Changes names the durable parts of a group one call changed. The durable
// record of a group splits into:
//
//   - the group-level part: every field of [Group] but Members, Target and
//     OwnerEpochs (epochs, versions, state, layout, correction round,
//     migration, creation time);
//   - one part per member: the durable fields of its [Member] (all but
//     MetadataVersion, capacity, Progress, LastHeartbeat, LeaseExpiresAt and
//     ReadableUntil) together with its target, Group.Target[id], which is
//     stored with the member so that a join writes the targets of the
//     members that lost shards to it and no other;
//   - one part per shard: its owner epoch, Group.OwnerEpochs[shard].
//
// A part listed here may have been changed and changed back within the
// call; writing it again is harmless. A part not listed is unchanged.
type Changes struct {
	// Group is true when the group-level part changed.
	Group bool
	// Members lists, sorted, the members whose part changed (or that were
	// added); each is in Group.Members.
	Members []string
	// Removed lists, sorted, the members removed from the group (pruned);
	// none of them is in Group.Members any more.
	Removed []string
	// OwnerEpochs lists, sorted, the shards whose owner epoch changed.
	OwnerEpochs []int
}

// Empty reports whether nothing durable changed.
func (c Changes) Empty() bool {
	return !c.Group && len(c.Members) == 0 && len(c.Removed) == 0 && len(c.OwnerEpochs) == 0
}

// Events lists what one call did. Member id lists are sorted within one
// maintenance pass and appear in the order things happened.
type Events struct {
	// Joined lists members that joined or rejoined (epoch 0 accepted).
	Joined []string
	// Left lists members that left gracefully (epoch -1 accepted).
	Left []string
	// Expired lists live members whose lease passed.
	Expired []string
	// Fenced lists members fenced: stale epoch, shards claimed outside their
	// authority, or a rebalance deadline passed.
	Fenced []string
	// Pruned lists terminal members removed after the retention.
	Pruned []string
	// Rebalanced is true when the target assignment changed.
	Rebalanced bool
	// DuplicateMember is true when an epoch-0 heartbeat named a live member
	// that already reported: another process uses the id, or a restarted one
	// is early (answered RETRY).
	DuplicateMember bool
	// StaleIncarnation is true when a heartbeat came from another
	// incarnation than the stored member's (a different instanceId with a
	// nonzero epoch): answered FENCED_MEMBER_EPOCH (or, for a leave, as a
	// leave) to that caller alone.
	StaleIncarnation bool
	// Released lists members no longer live whose shards were freed because
	// the lease of their last readable answer lapsed.
	Released []string
	// PreviousEpochAccepted is true when a heartbeat carrying the member's
	// previous epoch was processed as current (a lost response, not a
	// zombie).
	PreviousEpochAccepted bool
	// ForgottenEpochAccepted is true when a heartbeat carrying an epoch
	// above the member's stored one (and at most the assignment epoch) was
	// processed as current: the member was loaded from the store, which
	// does not keep epoch catch-ups.
	ForgottenEpochAccepted bool
	// LostEpoch is true when a member loaded from the store carried an
	// epoch above every one its group issued (the store went back, a
	// restored backup) and was answered through a metadata correction.
	LostEpoch bool
	// MemberLimitReached is true when a join was refused because the group
	// holds Config.MaxMembers members (answered RETRY).
	MemberLimitReached bool
}
