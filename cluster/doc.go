// Package cluster runs several coordinator replicas over one etcd cluster:
// it registers this replica, watches the others, places every unit of work
// (a consumer group, a stream's migration work) on exactly one live replica
// and claims it with an owner key that fences the store's writes.
//
// # What it owns
//
//   - The replica's etcd session: one lease (TTL a few seconds) kept alive
//     by the etcd client. The replica key and every owner key this replica
//     holds are bound to it, so a replica that dies or freezes loses all of
//     them one TTL later, without anybody deleting anything.
//   - The view of live replicas (a watch of the replica keys) and placement:
//     rendezvous hashing ([Owner]) of a unit over the live replicas, pure and
//     deterministic, and [Plan], which turns the view into the claims and
//     releases this replica should make.
//   - Owner keys and their [Fence]: the owner key's create revision. A store
//     write of a unit is an etcd transaction conditioned on [Fence.Cmp], so
//     a replica whose key lapsed (paused, cut off, deposed) can never write
//     again with that fence, even if it does not know yet.
//
// # What the caller does, in order
//
//  1. [Join] once per process with a unique replica id and the URL other
//     replicas and clients reach it at.
//  2. On every signal of [Node.Changes], run [Plan] over the units it knows
//     and the live replicas: stop the actor of each unit to release, then
//     [Node.Release] it; [Node.Claim] each unit to claim and start its
//     actor with the returned fence (loading the unit from the store).
//     A claim that failed may still have created its key ([Node.Strays]):
//     claim such a unit again (adopting the key) or release it.
//  3. Before an answer that reports ownership state to a client, check
//     [Node.Valid]: false means the lease may have lapsed (the process was
//     paused, its host suspended, etcd unreachable) and the answer must be
//     a retry.
//  4. When [Node.Done] closes, the lease is gone: stop every actor at once.
//  5. On shutdown, [Node.Leave]: it releases every owner key first (so
//     others take over without waiting a TTL), then the replica key, then
//     revokes the lease.
//
// # Invariants
//
//   - At most one owner key per unit exists at a time (created only where
//     none exists), and it is bound to its holder's lease.
//   - A fence is valid exactly while its owner key exists with its create
//     revision: deleting or expiring the key invalidates it for ever.
//
// # Not here
//
//   - No consensus of our own: etcd decides; this package only reads and
//     writes keys in transactions.
//   - No state of units: the store (persistence) holds it.
package cluster
