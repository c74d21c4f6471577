package persistence

import (
	"context"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// Store is the coordinator's durable state: one record per stream prefix and
// one snapshot per consumer group, each with a store revision for optimistic
// concurrency.
//
// Implementations are safe for concurrent use by many goroutines. Callers
// keep one writer per record (the stream actor for its stream record, each
// group actor for its group); the revision check catches a second writer
// rather than arbitrating between them.
//
// Records returned are owned by the caller: they share no memory with the
// store or with earlier results. Arguments are not retained.
//
// Revisions: every successful write returns a new revision, larger than that
// of every readable stored record and every revision handed out since the
// store was opened, so a record that is deleted and created again never
// reuses a revision a caller may still hold. Revision 0 means "no record".
//
// Every method but Close returns [ErrClosed] after Close and [ErrFailed]
// after a write failure left the store's contents unknown, until the store
// recovered (see [Store.Err]). A cancelled ctx
// is checked before any work; a write that has started is not abandoned.
type Store interface {
	// LoadStreams returns every stream record, sorted by prefix. A record that
	// does not decode is still listed, with only StreamPrefix and Err set
	// (see [StreamRecord.Err]); the error result is for failures of the load
	// itself.
	LoadStreams(ctx context.Context) ([]StreamRecord, error)
	// LoadGroups returns every group snapshot of streamPrefix, sorted by name,
	// and no group of another prefix (not even of one that starts with the
	// same characters). Decode failures are reported per record in
	// [GroupRecord.Err], not as the error result: that group fails closed,
	// the others load.
	LoadGroups(ctx context.Context, streamPrefix string) ([]GroupRecord, error)
	// LoadGroup returns one group snapshot, or [ErrNotFound]. A snapshot that
	// does not decode is returned as a record with Err set, and the same
	// error is also the error result.
	LoadGroup(ctx context.Context, streamPrefix, name string) (GroupRecord, error)
	// SaveStream writes rec if the stored revision of rec.StreamPrefix equals
	// expected (0: no record may exist) and returns the new revision;
	// [ErrStaleRevision] otherwise. rec.Revision and rec.Err are ignored.
	// The write is synced before SaveStream returns. A stored record that
	// does not decode is never overwritten: [ErrCorrupt] or
	// [ErrUnknownSchema].
	SaveStream(ctx context.Context, rec StreamRecord, expected uint64) (uint64, error)
	// DeleteStream deletes the stream record of streamPrefix if its
	// revision equals expected: [ErrNotFound] if there is none,
	// [ErrStaleRevision] if the revision differs, [ErrCorrupt] or
	// [ErrUnknownSchema] if the stored record does not decode (it is left
	// in place). Group records are not touched: the caller deletes the
	// stream's groups first (their tombstones stay, so that a group
	// created again under a name continues above its old epochs).
	// Synced.
	DeleteStream(ctx context.Context, streamPrefix string, expected uint64) error
	// SaveGroup writes g (its durable fields, see [GroupRecord]) if the
	// stored revision equals expected (0: no group may exist; a tombstone
	// does not count) and returns the new revision; [ErrStaleRevision]
	// otherwise. It writes the group record and the parts changes names
	// (members with their targets, owner-epoch chunks), all in one atomic
	// commit or, when that is too large for the engine, staged so that a
	// load sees all of it or none; nil changes writes every part and
	// deletes every stored part g no longer has (creation, migration,
	// rare admin steps). changes must name every part that differs from
	// what is stored: the store does not compare. The write is synced
	// before SaveGroup returns. A stored group record that does not decode
	// is never overwritten: [ErrCorrupt] or [ErrUnknownSchema].
	SaveGroup(ctx context.Context, g *assign.Group, changes *Changes, expected uint64) (uint64, error)
	// DeleteGroup deletes the group if its revision equals expected:
	// [ErrNotFound] if there is none, [ErrStaleRevision] if the revision
	// differs, [ErrCorrupt] or [ErrUnknownSchema] if the stored group
	// does not decode (it is left in place). The group leaves a tombstone
	// with its last epochs, metadata version and owner epochs
	// ([Store.LoadTombstone]), kept until a group of that name is saved
	// again. Synced.
	DeleteGroup(ctx context.Context, streamPrefix, name string, expected uint64) error
	// LoadTombstone returns the tombstone a deleted group left, or
	// [ErrNotFound] when there is none (never deleted, or the group exists
	// again). A group created under a name continues above its tombstone
	// ([assign.NewGroupAfter]).
	LoadTombstone(ctx context.Context, streamPrefix, name string) (*assign.Tombstone, error)
	// AppendAudit appends entry to the audit log and returns its sequence,
	// higher than that of every entry before it (entry.ID is ignored). The
	// write is synced before AppendAudit returns. Entries are never changed
	// or deleted through this interface.
	AppendAudit(ctx context.Context, entry protocol.AuditEntry) (uint64, error)
	// ListAudit returns at most q.Limit audit entries, newest first, that
	// match q (see [AuditQuery]). An entry that does not decode is returned
	// with Err set instead of failing the list.
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	// Err returns nil while the store serves, else why not: [ErrClosed], or
	// [ErrFailed] after a write failed (a full disk, an I/O error) until
	// the store recovered. A failed store recovers by itself: a call made
	// at least Options.RecoverInterval after the last attempt reopens the
	// engine and, once a synced write succeeds, serves again (health
	// checks call Err for that). Callers reload what they hold from the
	// store before they serve it again.
	Err(ctx context.Context) error
	// Health reports whether the store serves in a degraded state, and
	// why: it opened without acknowledged writes its write-ahead log lost
	// (Options.AcceptWALLoss; until a clean open without the option), or
	// it read an audit entry that does not decode (for the rest of its
	// life). A degraded store serves; health shows DEGRADED. Failures that
	// stop it are [Store.Err]'s.
	Health() (degraded bool, reason string)
	// WriteStats returns what the store wrote to its engine since it was
	// opened (commits, keys, bytes).
	WriteStats() WriteStats
	// Close releases the store. It is idempotent; it waits for calls in
	// flight and every later call returns [ErrClosed].
	Close() error
}

// StreamRecord is the stream-level record: shard layout and migrations of a
// stream prefix.
type StreamRecord struct {
	StreamPrefix string
	// ShardCount is the number of shards producers route to.
	ShardCount int
	// DrainingShards are removed shards still draining (scale-in); sorted,
	// no duplicates.
	DrainingShards  []int
	MetadataVersion int64
	// Migrations is the migration history, oldest first.
	Migrations []MigrationRecord
	CreatedAt  time.Time
	// Autoscale is the stream's autoscaling policy; nil when never set
	// (autoscaling off).
	Autoscale *AutoscaleRecord
	// Revision is the store revision, set by the store on load and ignored
	// by SaveStream.
	Revision uint64
	// Err is set, on load only, when the stored record cannot be decoded:
	// it wraps [ErrCorrupt] or [ErrUnknownSchema], and every other field but
	// StreamPrefix is zero. Callers must check it: such a stream fails closed
	// with all its groups.
	Err error
}

// MigrationRecord is one resharding of a stream as the stream record keeps
// it: the protocol view plus the operator context.
type MigrationRecord struct {
	// Migration holds reshardingId, from, to, state, createdAt, updatedAt.
	protocol.Migration
	RequestedBy string
	Reason      string
	// ActivatedAt is zero until the migration became ACTIVE.
	ActivatedAt time.Time
	// DeprecatedAfter, when set, is the earliest time the migration may
	// leave ACTIVE for DRAINING (the scale request's deprecatedAfter): an
	// operator keeps the rollback window open at least that long.
	DeprecatedAfter time.Time
	// RetiredShards are removed shards already proven drained and taken out
	// of assignment; sorted, no duplicates.
	RetiredShards []int
	// Note says why the migration waits, e.g. "redis not configured".
	Note string
}

// GroupRecord is one loaded group snapshot.
//
// Only durable fields are stored: everything of [assign.Group] and
// [assign.Member] except the member's reported MetadataVersion and
// capacity (MaxConcurrency, AvailableConcurrency), Progress, LastHeartbeat,
// LeaseExpiresAt and ReadableUntil, which come back zero (a restore gives
// every member a fresh lease and the next heartbeat reports the rest).
// Decoding cleans the record: maps are non-nil, shard sets are sorted,
// free of duplicates and non-nil, times are UTC.
type GroupRecord struct {
	StreamPrefix string
	Name         string
	// Group is the decoded snapshot, nil when Err is set.
	Group *assign.Group
	// Revision is the store revision; 0 when Err is set.
	Revision uint64
	// Err is set when the snapshot cannot be decoded: it wraps [ErrCorrupt]
	// or [ErrUnknownSchema] with detail. That group fails closed; it is never
	// rebuilt from member reports.
	Err error
}
