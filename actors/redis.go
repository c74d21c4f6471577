package actors

import (
	"context"
)

// StreamRedis is what the coordinator asks of Redis (docs/protocol.md §7): it
// creates shard streams and consumer groups, reads the facts drain proofs
// are made of, and deletes retired shards. It never reads or acknowledges
// records. Implementations are safe for concurrent use; package redisops
// has the go-redis one. Every method honours ctx.
type StreamRedis interface {
	// Provision makes every key exist with every group on it (XGROUP
	// CREATE key group 0 MKSTREAM). A group that exists already is a
	// success (BUSYGROUP): Provision is idempotent.
	Provision(ctx context.Context, keys, groups []string) error
	// Inspect reads one shard stream: its length and last id (XINFO
	// STREAM) and every consumer group on it (XINFO GROUPS). A missing key
	// is not an error: it answers Exists false.
	Inspect(ctx context.Context, key string) (ShardFacts, error)
	// Range reads at most count entries of key after the entry id after
	// (exclusive; "" means from the start), oldest first, or before it
	// (newest first) when backward is set. A missing key reads as empty.
	// It is for monitoring: nothing is read through a consumer group.
	Range(ctx context.Context, key, after string, count int64, backward bool) ([]Entry, error)
	// Delete deletes keys; missing keys are fine.
	Delete(ctx context.Context, keys ...string) error
	// Ping checks that Redis answers.
	Ping(ctx context.Context) error
}

// ShardFacts is one shard stream as Redis shows it.
type ShardFacts struct {
	Key             string
	Exists          bool
	Length          int64
	LastGeneratedID string
	Groups          []GroupFacts
}

// Entry is one stream entry read for monitoring.
type Entry struct {
	ID     string
	Fields map[string]any
}

// GroupFacts is one Redis consumer group on a shard stream.
type GroupFacts struct {
	Name            string
	Pending         int64
	LastDeliveredID string
	EntriesRead     int64
	// Lag is nil when Redis cannot tell (XINFO GROUPS answers null, e.g.
	// after deletions on Redis 7.0): unproven, never zero.
	Lag *int64
}

// Group returns the facts of the named group, or nil.
func (f ShardFacts) Group(name string) *GroupFacts {
	for i := range f.Groups {
		if f.Groups[i].Name == name {
			return &f.Groups[i]
		}
	}
	return nil
}
