// Package reshard is the migration state machine of rscoord
// (docs/protocol.md, resharding): PREPARING → ACTIVE → DRAINING →
// DEPRECATED, rollback to ROLLED_BACK (through ROLLING_BACK while a
// scale-out's added shards drain), an operator's complete, the
// deprecatedAfter hold, the producer routing-lease wait and the drain
// proofs of removed shards.
//
// It is pure and deterministic, like package assign: the stream's record,
// the facts the caller gathered (Redis answers, the groups' layouts and
// states, the time, operator commands) go in; a [Decision] describing the
// work left to do comes out. No goroutines, no I/O, no clock, no
// randomness, no logging, no package-level state. The record passed in is
// never changed: a decision that changes it carries the new record to
// save.
//
// # What the stream actor does
//
// Per operator command ([Scale], [Rollback], [Complete]) and per timer
// ([Check]), it acts on the decision in the order [Decision] gives:
//
//  1. Err: answer it; stop.
//  2. Save: write the record, synced, and adopt it. A failed write stops
//     here with a 503: nothing is acted on that is not durable, so a
//     restarted actor resumes from its record.
//  3. Layout: tell every group (or those in LayoutTo) the layout and wait
//     for their answers, beside the actor.
//  4. Redis work, beside the actor, never inside its mailbox:
//     Provision (then call [Provisioned] with the outcome), Gather (read
//     the groups and the removed shards, then call [Check] again with
//     Facts.Gathered), Delete (with DeleteThenRetire, call [Retired]).
//  5. CheckAt: schedule the next [Check].
//
// An operator's answer is the decision's Migration (or Err) once the steps
// it started are done. Waiting is shown in monitoring.
//
// # Invariants
//
//   - At most one migration of a stream is active (not DEPRECATED or
//     ROLLED_BACK); a migration only moves forward: PREPARING → ACTIVE →
//     DRAINING → DEPRECATED, or ACTIVE → (ROLLING_BACK →) ROLLED_BACK.
//   - MetadataVersion never goes down, and every change groups or producers
//     see (the layout, a migration state past PREPARING) bumps it. Saving a
//     new PREPARING migration does not: nobody routes differently yet.
//   - Draining shards are removed shards: each is >= ShardCount.
//   - A removed shard leaves assignment only when proven drained (or an
//     operator completes the migration), and never before one routing
//     lease after activation and deprecatedAfter.
//   - A migration is DEPRECATED only once no shard is draining and every
//     group converged on the layout without them.
//
// # Non-goals
//
// No persistence, timers, Redis, HTTP or metrics: the stream actor owns
// those. No group state: groups take layouts through package assign.
package reshard
