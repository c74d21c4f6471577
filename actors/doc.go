// Package actors runs the coordinator's state on protoactor-go: one stream
// actor per stream prefix supervising one group actor per consumer group.
//
// A group actor alone owns its *assign.Group. For every message it runs, in
// order:
//
//  1. the pure step of package assign (heartbeat, tick, admin change) on its
//     state with the current time;
//  2. when the result says Persist, the group becomes dirty and a flush is
//     queued behind the messages already in the mailbox (group commit);
//  3. the answer: at once while nothing is dirty, else held until the flush
//     has written the snapshot (synced, guarded by its store revision). One
//     write thus covers every heartbeat queued meanwhile. If the write fails
//     the actor reloads its last durable snapshot (the unwritten changes are
//     dropped) and answers every held heartbeat RETRY: a member is never
//     told anything that is not durable. Admin calls flush first, so they
//     act on durable state;
//  4. a timer for the result's next deadline (lease expiry, rebalance
//     deadline, pruning), delivered back to the actor as a message;
//  5. held heartbeats (waitMs, docs/protocol.md §9.5): an answer that would tell
//     its member nothing new is parked (the asker's answerTo, the request and
//     its end of wait, in a queue the group's one wait timer serves) instead
//     of sent. After every step that changed
//     the group, once the flush has written it and sent the answers that
//     waited for it, each parked answer that would now say something new
//     (assign.Unchanged) is computed afresh by running its heartbeat again
//     and sent through step 3; the rest go out, computed afresh too, when
//     their wait ends (or up to heldCoalesce before, with another). Parked answers are bounded by one limit across all
//     groups (Config.MaxHeldHeartbeats; past it a heartbeat is answered at
//     once) and answered RETRY on shutdown, a failed write, a panic, and
//     when the same member heartbeats again.
//
// A group whose snapshot is corrupt or of an unknown schema fails closed:
// heartbeats answer RETRY, admin and monitoring calls 503, and nothing is
// rebuilt from member reports. A panic inside a group actor restarts only
// that actor, from its last durable snapshot; the heartbeat it was handling
// and every held one are answered RETRY.
//
// The stream actor owns the stream record (shard layout and migrations) and
// serializes group creation, deletion and scaling for its prefix. It never
// waits inside its mailbox: Redis provisioning, drain reads and key deletes
// run on goroutines beside it and asks of its group actors are futures;
// both come back as continuations (ReenterAfter). Migration decisions are
// package reshard's; the stream actor gathers their facts and executes
// them, one migration step at a time (see reshard.go). The
// [Coordinator] is the only way in: it holds a concurrency-safe directory of
// actor PIDs so that heartbeats go straight to their group actor and never
// queue behind another group's work.
//
// What happens is reported to an [Observer] (metrics): every step of a
// group with its events, each group's state after durable changes, store
// write times, migration states. The audit log is written through
// [Coordinator.RecordAudit] straight to the store: entries belong to no
// actor.
//
// In the cluster mode ([Config.Placed]) the coordinator starts with no
// stream: its caller adds each stream this replica claims
// ([Coordinator.AddStream], loading it with its groups) and drops each it
// releases ([Coordinator.DropStream], after which requests about it are
// answered "moving, retry", never "not found"). Which replica runs which
// stream is the caller's decision (package cluster).
//
// Non-goals: this package does no HTTP and knows no JSON.
package actors
