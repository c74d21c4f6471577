package reshard

import (
	"slices"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Config holds the rules every migration of a coordinator runs with.
type Config struct {
	// Redis is true when the coordinator has Redis: new shards are
	// provisioned and removed shards proven drained. Without it a migration
	// activates at once and stays ACTIVE until an operator completes or
	// rolls it back.
	Redis bool
	// RoutingLease is how long a producer may publish on routing it has not
	// refreshed: no removed shard leaves ACTIVE sooner after activation.
	RoutingLease time.Duration
	// CheckInterval is how often an ACTIVE or DRAINING migration is checked
	// while it waits.
	CheckInterval time.Duration
	// RetireRemoved deletes the keys of removed shards once their migration
	// is DEPRECATED, so that late producers hit NOMKSTREAM.
	RetireRemoved bool
}

// Stream is the part of a stream record the migration state machine reads
// and writes. Shard sets are sorted and free of duplicates.
type Stream struct {
	Prefix string
	// ShardCount is what producers route to: shards 0..ShardCount-1.
	ShardCount int
	// Draining are removed shards (>= ShardCount) still readable and
	// assigned until proven drained.
	Draining []int
	// MetadataVersion is bumped by every change of the record.
	MetadataVersion int64
	// Migrations is the history, oldest first; at most one is active (not
	// DEPRECATED or ROLLED_BACK).
	Migrations []Migration
}

// Migration is one resharding of a stream as its record keeps it.
type Migration struct {
	// Migration holds reshardingId, from, to, state, createdAt, updatedAt.
	protocol.Migration
	RequestedBy string
	Reason      string
	// ActivatedAt is zero until the migration became ACTIVE; a rollback
	// that drains a scale-out's added shards (ROLLING_BACK) sets it to the
	// rollback. The producer routing lease counts from it: it is the last
	// change of the count producers route over.
	ActivatedAt time.Time
	// DeprecatedAfter, when set, holds the migration ACTIVE at least until
	// then (the scale request's deprecatedAfter).
	DeprecatedAfter time.Time
	// RetiredShards are removed shards proven drained (or retired by an
	// operator) and taken out of assignment.
	RetiredShards []int
	// Note is durable detail: why the migration cannot advance by itself,
	// or who ended it and why.
	Note string
}

// Layout is what every group of the stream must run: the shards producers
// route to, the removed ones still draining, and the active migration for
// display (nil when none).
type Layout struct {
	ShardCount int
	Draining   []int
	Active     *protocol.Migration
}

// Clone copies s deeply enough that changing the copy leaves s untouched.
func (s Stream) Clone() Stream {
	s.Draining = slices.Clone(s.Draining)
	s.Migrations = slices.Clone(s.Migrations)
	for i := range s.Migrations {
		s.Migrations[i].RetiredShards = slices.Clone(s.Migrations[i].RetiredShards)
	}
	return s
}

// Active is the migration not yet in a final state, or nil.
func (s *Stream) Active() *Migration {
	for i := range s.Migrations {
		if !final(s.Migrations[i].State) {
			return &s.Migrations[i]
		}
	}
	return nil
}

// Find returns the migration with id, or nil.
func (s *Stream) Find(id string) *Migration {
	for i := range s.Migrations {
		if s.Migrations[i].ReshardingID == id {
			return &s.Migrations[i]
		}
	}
	return nil
}

// Layout is the layout every group must run now.
func (s *Stream) Layout() Layout {
	l := Layout{ShardCount: s.ShardCount, Draining: slices.Clone(s.Draining)}
	if l.Draining == nil {
		l.Draining = []int{}
	}
	if m := s.Active(); m != nil {
		w := m.Migration
		w.Detail = m.Note
		l.Active = &w
	}
	return l
}

// ReadableKeys are the keys of every readable shard: live, then draining.
func (s *Stream) ReadableKeys() []string {
	keys := make([]string, 0, s.ShardCount+len(s.Draining))
	for i := range s.ShardCount {
		keys = append(keys, protocol.StreamKey(s.Prefix, i))
	}
	for _, i := range s.Draining {
		keys = append(keys, protocol.StreamKey(s.Prefix, i))
	}
	return keys
}

func final(st protocol.MigrationState) bool {
	return st == protocol.MigrationDeprecated || st == protocol.MigrationRolledBack
}

// drainingAfterScale is the set of removed shards still to drain after a
// scale from one count to another: shards cut by a scale-in are added,
// shards that a scale-out brings back into range are live again.
func drainingAfterScale(draining []int, from, to int) []int {
	out := []int{}
	for _, s := range draining {
		if s >= to {
			out = append(out, s)
		}
	}
	for s := to; s < from; s++ {
		out = append(out, s)
	}
	return normalize(out)
}

// normalize sorts shards and drops duplicates; never nil.
func normalize(shards []int) []int {
	out := slices.Clone(shards)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []int{}
	}
	return out
}
