package reshard

import (
	"time"
)

// Decision is what one call decided, in the order the stream actor must act
// on it (raft's Ready):
//
//  1. Err set: answer it to the operator; nothing else is to be done.
//  2. Save set: write it as the stream record, synced, before anything
//     else; if the write fails, stop and answer the store's error.
//  3. Layout set: tell it to the groups named in LayoutTo (every group when
//     LayoutTo is nil) and wait for them.
//  4. Provision, Gather, Delete: do that Redis (and group) work beside the
//     actor, then call [Provisioned], [Check] or [Retired] with its
//     outcome. At most one of them is set.
//  5. CheckAt non-zero: run [Check] then (replacing an earlier schedule).
//
// Waiting says, for monitoring, why the active migration did not advance;
// the actor shows it until the next decision.
type Decision struct {
	Err error
	// Save is the new stream record, or nil when the record is unchanged.
	Save *Stream
	// Layout is the layout groups must take, or nil.
	Layout *Layout
	// LayoutTo lists the groups to tell; nil means every group.
	LayoutTo []string
	// Provision lists shard keys to create with every group of the stream
	// on them (XGROUP CREATE … 0 MKSTREAM), for the migration Migration.
	// An empty list with ProvisionNeeded set means nothing to create: call
	// Provisioned at once.
	Provision       []string
	ProvisionNeeded bool
	// Gather asks for facts before the check can decide: the groups'
	// layouts and states, and the drain facts of these shards.
	Gather *Gather
	// Delete lists keys of retired shards to delete. With DeleteThenRetire
	// the migration becomes DEPRECATED only once they are gone: call
	// Retired with the outcome. Otherwise deleting is best effort.
	Delete           []string
	DeleteThenRetire bool
	// CheckAt is when to check the active migration next; zero means no
	// check is due.
	CheckAt time.Time
	// RoutedSince, when set, is a time since which every group is known to
	// answer producers the record's shard count (the check saw them all on
	// it): remember it and pass it back as Facts.RoutedSince while the
	// count stays the same.
	RoutedSince time.Time
	// Waiting says why the active migration did not advance ("" when it
	// did or nothing is active).
	Waiting string
	// Migration is the migration the call acted on (for the operator's
	// answer), or nil.
	Migration *Migration
}

// Gather lists the facts a check needs.
type Gather struct {
	// Groups: read every group's layout and state.
	Groups bool
	// Shards: read the drain facts of these removed shards in Redis.
	Shards []int
}

// Facts is what the stream actor knows at a check.
type Facts struct {
	Now time.Time
	// Resume is set on the first check after a restart found a PREPARING
	// migration: its provisioning is retried once.
	Resume bool
	// Gathered is set when Groups and Shards were read for this check, as
	// an earlier Decision.Gather asked.
	Gathered bool
	// RoutedSince is the earliest time since which every group is known to
	// answer producers the record's shard count, as the caller remembers
	// it (an earlier Decision.RoutedSince, or the end of a layout push
	// every group took); zero when unknown, after a restart say. Until a
	// group takes a layout it answers routing by the previous count, each
	// answer good for one routing lease, so the lease counts from here.
	RoutedSince time.Time
	Groups      []GroupFacts
	Shards      []ShardFacts
}

// GroupFacts is one group's layout and state, or why it could not tell.
type GroupFacts struct {
	Name       string
	ShardCount int
	Draining   []int
	// Converged is true when the group is STABLE or EMPTY.
	Converged bool
	// State is the group's state, for Waiting.
	State string
	Err   error
}

// ShardFacts is one removed shard as Redis shows it.
type ShardFacts struct {
	Shard int
	Key   string
	// Exists is false when the key is gone (proven drained).
	Exists bool
	Groups []GroupLag
	// Err is set when Redis could not be read: unproven.
	Err error
}

// GroupLag is one Redis consumer group on a shard.
type GroupLag struct {
	Name    string
	Pending int64
	// Lag is nil when Redis cannot tell: unproven, never zero.
	Lag *int64
}
