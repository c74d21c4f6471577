package assign

import (
	"time"

	"github.com/rscoord/rscoord/protocol"
)

// Result is what one call did to a group, in the order the group actor must
// act on it (raft's Ready): persist the group if Persist, then send
// Response, then schedule [Tick] at Next.
type Result struct {
	// Response answers the heartbeat. It is the zero value for [Tick],
	// [Restore] and [SetLayout], which answer nobody.
	Response protocol.HeartbeatResponse
	// Persist is true when something durable changed (anything but leases,
	// last-heartbeat times, progress, capacity and the member's reported
	// metadata version). The group must be written, synced, before Response
	// leaves the actor: a response never tells a member anything that a
	// restart could forget. A steady heartbeat of a STABLE group is false.
	Persist bool
	// Next is the earliest time [Tick] must run: a lease expiry, a rebalance
	// deadline or a prune. It may be early (Tick then finds nothing to do and
	// says when to come back), never late. Zero means no timer is pending.
	Next time.Time
	// Events says what happened, for metrics and logs; this package logs
	// nothing itself.
	Events Events
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
	// PreviousEpochAccepted is true when a heartbeat carrying the member's
	// previous epoch was processed as current (a lost response, not a
	// zombie).
	PreviousEpochAccepted bool
}
