// Package persistence is the coordinator's durable state: the [Store]
// interface, its embedded Pebble implementation ([OpenPebble]) and an
// in-memory implementation for tests ([NewMemory]) that runs the same
// revision logic, encoding and decoding.
//
// # What it owns
//
//   - One stream record per stream prefix ([StreamRecord]: shard layout,
//     draining shards, migration history) and, per consumer group, a group
//     record (group-level state), one key per member (with its target) and
//     one key per 64 owner epochs; a deleted group leaves a tombstone with
//     its last epochs, version and owner epochs ([Store.LoadTombstone]).
//     A save writes the group record and the parts the caller names
//     ([Changes]) in one atomic commit, so a heartbeat that changed one
//     member writes two small keys, whatever the size of the group.
//   - The audit log: append-only entries of admin mutations, keyed by a
//     sequence that is a store revision, listed newest first.
//   - API tokens ([APITokens]): one record per token name holding the
//     SHA-256 of its secret, written once and deleted on revoke.
//   - The on-disk format: key layout (keys.go), the checksummed envelope and
//     the versioned record types (encoding.go, group_codec.go), the rule that old
//     code refuses new data, and the migration of older data at open
//     (open.go).
//   - The storage-engine seam (kv.go): every engine behind one small
//     contract of atomic commits and range reads, with write accounting
//     ([WriteStats]) above it.
//   - Store revisions: optimistic concurrency for the one writer of each
//     record.
//
// # What the caller does, in order
//
//  1. Open the store once per process ([OpenPebble]; Pebble's lock file
//     refuses a second process) and close it last, after every actor
//     stopped.
//  2. At start, [Store.LoadStreams], then [Store.LoadGroups] per stream.
//     Check [StreamRecord.Err] and [GroupRecord.Err]: a record that does not
//     decode ([ErrCorrupt], [ErrUnknownSchema]) fails closed (its endpoints
//     answer 503, its heartbeats RETRY) and is never rebuilt from member
//     reports. Give every restored member a fresh lease: leases, heartbeat
//     times and progress are not stored.
//  3. Keep the revision each load or save returns, and pass it as expected
//     to the next save or delete of that record (0 to create). Each record
//     has one writer (its actor); [ErrStaleRevision] means a second writer
//     exists, which is a bug to stop on, not a conflict to retry.
//  4. Save before you answer: a save returns after the write is synced, so a
//     response sent after it tells nothing that is not durable. Run saves of
//     different groups concurrently (one per group actor): Pebble's commit
//     pipeline then shares one fsync between them.
//  5. On [ErrFailed] stop answering from what you hold: a write failed in a
//     way that leaves the on-disk state unknown, or Pebble's background
//     work (a flush) met a disk error and later writes would stall. The
//     store recovers by itself (it reopens its engine, at most once per
//     Options.RecoverInterval, and serves again once a synced write
//     succeeds; [Store.Err] reports and drives it); reload what you hold
//     from the store before serving it again.
//
// # Invariants
//
//   - Every save and delete is synced before it returns; a save that returns
//     an error did not report success, and after a write error the store
//     refuses every call ([ErrFailed]) until it reopened its engine and a
//     synced write succeeded; nothing it cached before survives that.
//   - A data directory is 0700 with 0600 files; a pid file beside Pebble's
//     lock names the process that holds it; a directory that visibly lost
//     acknowledged state (tables without their manifest marker, fewer
//     revisions than at its last clean close, a write-ahead log damaged
//     before its last record or missing) is refused at open. With
//     Options.AcceptWALLoss a damaged or missing log opens without the
//     lost writes and the store reports itself degraded ([Store.Health])
//     until a clean open without the option (walloss.go).
//   - The revision check and the write are one step per record: of writers
//     racing with the same expected revision exactly one wins.
//   - Revisions grow: each write gets a revision above every revision stored
//     or handed out since open, so a deleted and re-created record never
//     reuses one.
//   - A value whose checksum fails is [ErrCorrupt]; one of another schema
//     version is [ErrUnknownSchema]. Neither is decoded, overwritten or
//     deleted by this package.
//   - Loaded records are clean (maps non-nil, shard sets sorted, unique and
//     non-nil, times UTC) and share no memory with the store or the caller;
//     saved groups are not retained.
//   - The groups of a prefix never include those of another prefix, also
//     not of one that merely starts with the same characters.
//
// # Not here
//
//   - No business rules: the store does not check epochs, assignments or
//     migration steps (package assign does). It checks names, identity and
//     revisions only.
//   - No caching of records (only of revisions) and no background
//     goroutines of its own (Pebble runs its own and stops them in Close).
//   - No stream deletion or history of group snapshots yet; no retention
//     of audit entries (they are kept for ever).
//   - No replication of our own: one process owns one Pebble directory.
//     Several replicas share a store only on etcd ([OpenEtcd]), which
//     replicates; there [EtcdOptions.Fence] makes every write of a unit
//     conditional on this replica's owner key, and a refused write
//     ([ErrNotOwner]) leaves the store usable.
package persistence
