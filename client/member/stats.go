package member

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ShardStats are one member's counters for one shard, kept for the
// Runtime's life (across the member's runs of the shard).
type ShardStats struct {
	MemberID string
	Shard    int
	// Owned: the member owns the shard now.
	Owned bool
	// InFlight are records read and not finished: queued or in a handler.
	InFlight int64
	// Handled counts records whose handler calls are over (whatever the
	// outcome); Acked those acknowledged (Ack, AckDel); Nacked those left
	// pending (Nack, or given up after the handler failed).
	Handled, Acked, Nacked int64
	// HandlerErrors counts failed handler calls; Retries the calls that
	// were repeated in place (WithHandlerRetry).
	HandlerErrors, Retries int64
	// DeadLettered counts records moved to the dead-letter stream
	// (WithDeadLetter).
	DeadLettered int64
	// LastID is the id of the last record read.
	LastID string
	// Lag is the number of entries of the shard not yet read by the group
	// when LagKnown, as of LagAt: 0 when a read came back short (caught
	// up), else Redis's own count (XINFO GROUPS), asked at each claim.
	Lag      int64
	LagKnown bool
	LagAt    time.Time
}

// shardCounters are the live counters behind ShardStats.
type shardCounters struct {
	inFlight, handled, acked, nacked, errors, retries, deadLettered atomic.Int64

	mu       sync.Mutex
	lastID   string
	lag      int64
	lagKnown bool
	lagAt    time.Time
}

func (c *shardCounters) read(id string) {
	c.mu.Lock()
	c.lastID = id
	c.mu.Unlock()
}

func (c *shardCounters) setLag(lag int64, known bool) {
	c.mu.Lock()
	c.lag, c.lagKnown, c.lagAt = lag, known, time.Now()
	c.mu.Unlock()
}

type statsKey struct {
	member string
	shard  int
}

// statsBoard holds the counters of every (member, shard) of a Runtime.
type statsBoard struct {
	mu     sync.Mutex
	shards map[statsKey]*shardCounters
}

// counters returns the counters of member's shard, made on first use.
func (b *statsBoard) counters(member string, shard int) *shardCounters {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shards == nil {
		b.shards = map[statsKey]*shardCounters{}
	}
	k := statsKey{member, shard}
	c := b.shards[k]
	if c == nil {
		c = &shardCounters{}
		b.shards[k] = c
	}
	return c
}

// Stats reports, per member and shard it ever read, what the Runtime did,
// sorted by member and shard. It never blocks on I/O.
func (r *Runtime) Stats() []ShardStats {
	owned := map[statsKey]bool{}
	for _, m := range r.board.status().Members {
		for _, s := range m.Owned {
			owned[statsKey{m.MemberID, s}] = true
		}
	}
	b := r.stats
	b.mu.Lock()
	out := make([]ShardStats, 0, max(len(b.shards), len(owned)))
	seen := map[statsKey]bool{}
	for k, c := range b.shards {
		seen[k] = true
		c.mu.Lock()
		out = append(out, ShardStats{
			MemberID: k.member, Shard: k.shard, Owned: owned[k],
			InFlight: max(c.inFlight.Load(), 0), Handled: c.handled.Load(), Acked: c.acked.Load(), Nacked: c.nacked.Load(),
			HandlerErrors: c.errors.Load(), Retries: c.retries.Load(), DeadLettered: c.deadLettered.Load(),
			LastID: c.lastID, Lag: c.lag, LagKnown: c.lagKnown, LagAt: c.lagAt,
		})
		c.mu.Unlock()
	}
	b.mu.Unlock()
	for k := range owned {
		if !seen[k] {
			out = append(out, ShardStats{MemberID: k.member, Shard: k.shard, Owned: true})
		}
	}
	slices.SortFunc(out, func(x, y ShardStats) int {
		return cmp.Or(cmp.Compare(x.MemberID, y.MemberID), cmp.Compare(x.Shard, y.Shard))
	})
	return out
}
