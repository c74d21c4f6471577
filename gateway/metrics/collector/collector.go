// Package collector is the coordinator's background reader of the gauges
// that cost I/O to compute: per-shard length, pending and lag read from
// Redis (XINFO STREAM / XINFO GROUPS through the coordinator), and each
// shard key's memory (MEMORY USAGE). It runs on its own goroutine every
// interval, bounded in time per round, so that neither a scrape nor a
// heartbeat ever waits on Redis. Per-member gauges are not read here:
// metrics reads them from the group actors at scrape time
// ([metrics.Metrics.SetLiveSource]).
package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// Source is what a round reads; the coordinator of package actors
// implements it.
type Source interface {
	// Health reports the coordinator's health; a round reads only the
	// Redis status: NOT_CONFIGURED, UP, or anything else for down.
	Health(ctx context.Context) protocol.Health
	// Groups lists the groups to read. On an error the round logs it and
	// still reads the groups returned.
	Groups(ctx context.Context) (protocol.GroupsResponse, error)
	// Shards reads one group's shards live from Redis; a round calls it
	// only while Redis is UP. On an error the group has no shard series
	// that round.
	Shards(ctx context.Context, prefix, group string) (protocol.ShardsResponse, error)
}

// Memory reads what shard keys take in Redis's memory; [RedisMemory] is
// the go-redis one.
type Memory interface {
	// MemoryUsage returns the bytes each key takes (MEMORY USAGE), in the
	// order of keys, -1 for a key that does not exist.
	MemoryUsage(ctx context.Context, keys []string) ([]int64, error)
}

// Sink receives a round's results; *metrics.Metrics implements it.
type Sink interface {
	// SetShardStats replaces every shard series with stats, the shards of
	// the groups read this round.
	SetShardStats(stats []metrics.ShardStat)
	// SetShardMemory replaces every shard memory series with mems, the
	// keys read this round.
	SetShardMemory(mems []metrics.ShardMemory)
	// CollectionDone ends a round: redisUp is nil when Redis is not
	// configured, else whether its status was UP; took is the round's
	// duration; failedGroups counts the groups whose members or shards
	// could not be read.
	CollectionDone(redisUp *bool, took time.Duration, failedGroups int)
}

// Config configures [Run].
type Config struct {
	// Source is what rounds read; required.
	Source Source
	// Sink receives each round's results; required.
	Sink Sink
	// Interval is the time between the starts of two rounds.
	Interval time.Duration
	// Timeout bounds one round; it must not exceed Interval. Groups not
	// read in time have no shard series until a later round reads them.
	Timeout time.Duration
	// Memory, when set, reads each existing shard key's memory once a
	// round, after the shard stats and within the same Timeout; keys
	// not read in time have no memory series until a later round reads
	// them. Nil: no memory series.
	Memory Memory
	// History, when set, keeps each round's shard figures for the
	// console's charts. Nil: none kept.
	History *History
	// Logger receives a round's warnings (groups that could not be
	// listed or read) and, at debug level, why; nil discards them.
	Logger *slog.Logger
}

func (c Config) validate() error {
	var errs []error
	if c.Source == nil || c.Sink == nil {
		errs = append(errs, errors.New("collector: Source and Sink are required"))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("collector: interval %v must be positive", c.Interval))
	}
	if c.Timeout <= 0 || c.Timeout > c.Interval {
		errs = append(errs, fmt.Errorf("collector: timeout %v must be positive and at most the interval %v", c.Timeout, c.Interval))
	}
	return errors.Join(errs...)
}

// Run collects once at once, then every Interval, until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		Round(ctx, cfg)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Round runs one collection bounded by cfg.Timeout and hands the results
// to the sink. Series of groups that could not be read are left out (a
// lag that cannot be read is absent, never a stale or zero value).
func Round(ctx context.Context, cfg Config) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	var redisUp *bool
	switch cfg.Source.Health(rctx).RedisDetail.Status {
	case protocol.HealthNotConfigured:
	case protocol.HealthUp:
		up := true
		redisUp = &up
	default:
		up := false
		redisUp = &up
	}
	groups, err := cfg.Source.Groups(rctx)
	if err != nil {
		cfg.Logger.Warn("metrics collection: listing groups failed", slog.Any("error", err))
	}
	var (
		stats  []metrics.ShardStat
		failed int
	)
	for _, g := range groups.Groups {
		// Without Redis (or while it does not answer) there is nothing to read.
		if redisUp == nil || !*redisUp {
			break
		}
		sh, err := cfg.Source.Shards(rctx, g.StreamPrefix, g.ConsumerGroup)
		if err != nil {
			failed++
			cfg.Logger.Debug("metrics collection: shards", slog.String("stream", g.StreamPrefix), slog.String("group", g.ConsumerGroup), slog.Any("error", err))
			continue
		}
		stats = append(stats, shardStats(sh)...)
		if cfg.History != nil {
			cfg.History.Record(start, sh)
		}
	}
	if cfg.History != nil && err == nil {
		cfg.History.Retain(groups.Groups)
	}
	if failed > 0 {
		cfg.Logger.Warn("metrics collection: some groups could not be read; their series are absent until the next round",
			slog.Int("groups", failed), slog.Duration("timeout", cfg.Timeout))
	}
	cfg.Sink.SetShardStats(stats)
	if cfg.Memory != nil {
		cfg.Sink.SetShardMemory(readMemory(rctx, cfg, stats))
	}
	cfg.Sink.CollectionDone(redisUp, time.Since(start), failed)
}

// memoryBatch is how many keys one MEMORY USAGE pipeline reads: a round
// whose time runs out loses the batch under way and the ones after it,
// not every key.
const memoryBatch = 100

// readMemory reads the memory of every existing shard key of stats, each
// key once however many groups read it, until ctx is done.
func readMemory(ctx context.Context, cfg Config, stats []metrics.ShardStat) []metrics.ShardMemory {
	type shardKey struct {
		stream string
		shard  int
	}
	var (
		keys  []string
		named []shardKey
		seen  = map[shardKey]bool{}
	)
	for _, s := range stats {
		k := shardKey{s.Stream, s.Shard}
		if !s.Exists || seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, protocol.StreamKey(s.Stream, s.Shard))
		named = append(named, k)
	}
	var out []metrics.ShardMemory
	for lo := 0; lo < len(keys) && ctx.Err() == nil; lo += memoryBatch {
		hi := min(lo+memoryBatch, len(keys))
		bytes, err := cfg.Memory.MemoryUsage(ctx, keys[lo:hi])
		if err != nil {
			cfg.Logger.Warn("metrics collection: shard memory could not be read; those keys have no memory series this round",
				slog.Int("keys", len(keys)-lo), slog.Any("error", err))
			break
		}
		for i, b := range bytes {
			if b >= 0 {
				out = append(out, metrics.ShardMemory{Stream: named[lo+i].stream, Shard: named[lo+i].shard, Bytes: b})
			}
		}
	}
	return out
}

func shardStats(sh protocol.ShardsResponse) []metrics.ShardStat {
	out := make([]metrics.ShardStat, 0, len(sh.Shards))
	for _, s := range sh.Shards {
		st := metrics.ShardStat{Stream: sh.StreamPrefix, Group: sh.ConsumerGroup, Shard: s.ShardIndex, Length: s.Length, Exists: s.Exists}
		if s.Exists {
			pending := s.Pending
			st.Pending = &pending
			if s.Lag != nil {
				lag := *s.Lag
				st.Lag = &lag
			}
		}
		out = append(out, st)
	}
	return out
}
