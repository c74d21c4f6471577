// Package assign is the group state machine of rscoord (docs/protocol.md §6): the
// heartbeat decision, epochs, ownership validation, blocked sets, the sticky
// assignor, lease expiry, rebalance deadlines, metadata correction and
// shard-layout changes of one consumer group.
//
// It is pure and deterministic, like etcd's RawNode: state, request and the
// current time go in; the mutated [Group] and a [Result] describing the work
// left to do come out. No goroutines, no I/O, no clock, no randomness, no
// logging, no package-level state. One goroutine (the group actor) owns a
// Group and calls this package; nothing here locks.
//
// # What the group actor does
//
// Once, after loading a group from the store:
//
//  1. Call [Restore]. Leases are not durable; Restore gives every owning
//     member a fresh lease so the restart itself expires nobody. Persist if
//     Result.Persist; schedule a tick at Result.Next.
//
// Per heartbeat, in this order:
//
//  1. [Validate] the request against the path member id. If it refuses,
//     answer the refusal ([Refusal.Answer]) and stop: no group is looked
//     up or created.
//  2. Look the group up. Unknown stream, or unknown group that is not
//     registered on the fly: refuse it [Unknown]. Store down, group failed
//     closed, shutting down, overloaded: refuse it [Retry]. (Registering a
//     group: [NewGroup], persist it.)
//  3. Call [Heartbeat] with the actor's clock.
//  4. If Result.Persist, write the group and sync it. If the write fails,
//     do not send Result.Response: refuse it [Retry] and reload the
//     group from the store (the in-memory group is ahead of the durable
//     one; a response must never reveal what a restart would forget).
//  5. Send Result.Response.
//  6. Schedule [Tick] at Result.Next (replacing an earlier schedule; zero
//     means none). Events are for metrics and logs.
//
// Per timer: call [Tick] at the scheduled time, then steps 4 and 6 above
// (there is no response). Per layout change (resharding): call [SetLayout],
// then steps 4 and 6. Monitoring reads the views ([Group.Summary],
// [Group.MemberViews], [Group.Assignments], [Group.Consumption]) from the
// actor's goroutine; they copy.
//
// # Invariants
//
// After every call, and checked by [CheckInvariants]:
//
//   - A shard is in at most one target, only live members have targets, and
//     targets hold only readable shards (0..ShardCount-1 plus draining).
//   - A shard is granted to (may be read by) at most one member, and never
//     while another member holds it in its current, revoking or granted
//     set, whatever that member's state. Granted counts as held: a member
//     may read a shard between the answer that grants it and the report
//     that says it owns it.
//   - The hand-off invariant (docs/protocol.md) is the one rule that frees
//     a shard: a member's holdings are cleared only when it reported them
//     terminal, rejoined with epoch 0 from the same incarnation, or the
//     lease of its last answer that let it read (Member.ReadableUntil) has
//     lapsed. Fences, expiries and rebalance deadlines change its state at
//     once and free nothing sooner. A rebalance deadline starts with the
//     first answer that tells the member to give a shard up.
//   - Every shard in an answer's assignedShards carries its owner epoch
//     (Group.OwnerEpochs), raised when it is granted to a member that did
//     not already hold it; owner epochs never go down, also across
//     delete and re-create ([Tombstone]).
//   - Result.Changes names exactly the durable parts a call changed; the
//     steady heartbeat names none, a join names the joiner, the members
//     whose target gave it shards, and the group.
//   - GroupEpoch, AssignmentEpoch, MetadataVersion and each member's stored
//     epoch never go down. MetadataVersion changes only with membership,
//     target, layout, migration or a metadata correction, never with a lease
//     renewal or a progress report, so members can match it.
//   - Result.Persist is false for a heartbeat that changed nothing durable
//     (the steady heartbeat of a STABLE group), and such a heartbeat does
//     not scan the group: it costs O(the member's shards). An answer that
//     only catches a live member's epoch up with the assignment epoch is
//     not a durable change (see catchUp in op.go); after a load such a
//     forgotten epoch is accepted back (docs/protocol.md §6.1 step 5).
//   - The assignor runs only when membership or layout changed.
//
// # Deliberate readings of docs/protocol.md
//
//   - blocked(m) also counts shards granted to another owning member (see
//     above), not only its current and revoking sets.
//   - A heartbeat carrying the member's previous epoch is processed as
//     current when each owned shard is in its target or already accepted as
//     held by it. The protocol names only the target, which would fence a
//     member whose lost response was the one revoking a shard — our epochs,
//     unlike KIP-848's, advance while a revocation is still running.
//   - A report frees a held shard it leaves out only when it carries the
//     metadata version of the first answer that took the shard away, or a
//     later one; a granted shard it leaves out stays held as revoking when
//     the answer takes it away (withdrawn.go). The protocol takes every
//     report at its word, which a late copy of one turns against the
//     member that sent it.
//   - A stale epoch does not only answer FENCED_MEMBER_EPOCH, it fences the
//     member (state FENCED), so its epoch-0 rejoin is accepted at once
//     instead of being answered RETRY as a duplicate until its lease ends.
//     A heartbeat carrying another instanceId than the stored one is not
//     the member at all: it is answered alone and changes nothing (a leave
//     from it is answered as a leave).
//   - An epoch-0 heartbeat of a member that is no longer live but still
//     holds shards rejoins at once only when the same instanceId proves it
//     is the process that may be reading; without instanceId on both sides
//     (reference clients) nothing tells the fenced process from a second
//     one, so it gets RETRY until the holdings are released (the lease of
//     the last readable answer lapses), then rejoins.
//   - An epoch-0 heartbeat carrying the requestId of the join that created
//     the member's incarnation, once the member reported, is a late copy
//     of that join (its retry was answered): RETRY, nothing changes, even
//     with the same instanceId, which would otherwise rejoin it and free
//     what it reads.
//   - Opening a correction round moves MetadataVersion past the reported
//     version (see correction.go).
//   - A leave that reports shards outside the member's authority drops them
//     instead of fencing the leaver.
//   - An epoch catch-up is not written before its answer, and a member
//     loaded from the store accepts, once, an epoch above the stored one
//     and at most the assignment epoch (docs/protocol-notes.md, epoch
//     catch-ups).
//   - GroupEpoch is also bumped by a layout change, so a new target always
//     comes with a new member epoch.
//
// # Non-goals
//
// No persistence, timers, HTTP, Redis or metrics: the actor owns those. No
// migration state machine (§7): resharding calls [SetLayout] with the
// readable shards and sets [Group.ActiveMigration] for display. No
// rebuilding of state from member reports. The group state ASSIGNING is
// never used: assignment is synchronous.
package assign
