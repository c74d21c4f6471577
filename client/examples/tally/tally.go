// Package tally is a small consumer service written only against the
// public client API, the way the member package's documentation tells an
// application to build one: a per-record Handler that reads a numeric
// field, adds it to a running total per shard and acknowledges the record
// with msg.Ack; records that keep failing go to a dead-letter stream; hooks
// log what the runtime does. Command cmd/tally runs it until SIGTERM, and
// the bench harness runs it in its process against a raw go-redis loop
// (rscoord-bench dataplane).
package tally

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
)

// Config is what the service needs to run.
type Config struct {
	// Coordinator is the coordinator's base URL (several: replicas).
	Coordinator []string
	// Stream is the stream prefix; its shards are "{Stream}:0" ….
	Stream string
	// Redis is the client of the shards' Redis.
	Redis redis.UniversalClient
	// Workers is how many records the service handles at once.
	Workers int
	// Field is the integer field summed per shard ("n" when empty).
	Field string
	// Log receives the service's and the runtime's lines.
	Log *slog.Logger
	// Auth, if set, authenticates to the coordinator
	// (member.WithBasicAuth or member.WithBearerToken).
	Auth member.Opt
}

// Service adds up Field per shard.
type Service struct {
	cfg     Config
	rt      *member.Runtime
	records atomic.Int64
	// totals holds one *atomic.Int64 per shard. The runtime hands a
	// shard's records to one worker at a time, but the workers handle
	// several shards at once: a lock around one map would make them
	// queue on each other for every record.
	totals sync.Map
}

// maxDeliveries is how often a record is handed to the handler before it
// is dead-lettered.
const maxDeliveries = 5

// New checks cfg and builds the service's member runtime.
func New(cfg Config) (*Service, error) {
	if cfg.Field == "" {
		cfg.Field = "n"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Service{cfg: cfg}
	log := cfg.Log
	rt, err := member.New(s.handle,
		member.WithCoordinator(cfg.Coordinator...),
		member.WithStream(cfg.Stream),
		member.WithRedis(cfg.Redis),
		member.WithMaxWorkers(cfg.Workers),
		member.WithLogger(log),
		member.WithDeadLetter(maxDeliveries, cfg.Stream+":dead"),
		member.WithHooks(member.Hooks{
			OnAssigned: func(_ context.Context, c member.ShardChange) {
				log.Info("shards assigned", "shards", c.Shards, "reason", c.Reason)
			},
			OnRevoked: func(_ context.Context, c member.ShardChange) {
				log.Info("shards revoked", "shards", c.Shards, "reason", c.Reason)
			},
			OnHandlerError: func(_ context.Context, e *member.HandlerError) {
				log.Warn("handler failed", "records", len(e.Messages), "attempt", e.Attempt, "err", e.Err)
			},
			OnDeadLetter: func(_ context.Context, d member.DeadLetter) {
				log.Error("record dead-lettered", "streamKey", d.Message.StreamKey, "id", d.Message.ID,
					"deliveries", d.Deliveries, "err", d.Err)
			},
		}),
		cfg.Auth,
	)
	if err != nil {
		return nil, err
	}
	s.rt = rt
	return s, nil
}

// Run consumes until ctx ends, then leaves the group and returns.
func (s *Service) Run(ctx context.Context) error { return s.rt.Run(ctx) }

// Ready reports whether every member of the service holds an answer.
func (s *Service) Ready() bool { return s.rt.Ready() }

// Records is the number of records added up so far.
func (s *Service) Records() int64 { return s.records.Load() }

// Totals is the running total per shard.
func (s *Service) Totals() map[int]int64 {
	out := map[int]int64{}
	s.totals.Range(func(k, v any) bool {
		out[k.(int)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// errBadRecord marks a record without an integer Field: a retry does not
// fix it, so it is left to the dead-letter stream.
var errBadRecord = errors.New("record without an integer field")

// handle adds one record to its shard's total and acknowledges it. Its
// ack is coalesced by the runtime (see member.Message.Ack).
func (s *Service) handle(ctx context.Context, msg *member.Message) error {
	n, err := msg.Int(s.cfg.Field)
	if err != nil {
		return errors.Join(errBadRecord, err)
	}
	t, ok := s.totals.Load(msg.Shard)
	if !ok {
		t, _ = s.totals.LoadOrStore(msg.Shard, new(atomic.Int64))
	}
	t.(*atomic.Int64).Add(n)
	s.records.Add(1)
	return msg.Ack(ctx)
}
