package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redisconn"
)

// Record is one record of a batch.
type Record struct {
	// PartitionKey chooses the shard (protocol.Route).
	PartitionKey string
	// Fields are the record's fields, in any shape Publish accepts.
	Fields any
}

// Result is the outcome of one record of a batch.
type Result struct {
	// StreamKey is the key the record was written to (or last tried).
	StreamKey string
	// ID is the entry id Redis assigned; empty on error.
	ID string
	// Err is nil when the record was written.
	Err error
}

// PublishBatch writes records in one pipeline and returns one Result per
// record, in the same order. On a Redis Cluster the go-redis cluster
// pipeline sends each node its share. Records whose shard stream was missing
// are written again, in their original order, after one synchronous routing
// refresh per attempt (up to WithMaxAttempts attempts); records of one
// partition key keep their relative order, since they share a shard. A
// record with invalid fields fails alone; a lease, start or close error
// fails every record not yet written.
//
// Every Err is classified (see [ErrRetryable], [ErrPossiblyWritten]).
func (p *Producer) PublishBatch(ctx context.Context, records []Record) []Result {
	results := p.publishBatch(ctx, records)
	for i := range results {
		results[i].Err = classify(results[i].Err)
	}
	return results
}

func (p *Producer) publishBatch(ctx context.Context, records []Record) []Result {
	results := make([]Result, len(records))
	todo := make([]int, 0, len(records))
	for i, rec := range records {
		if err := checkFields(rec.Fields); err != nil {
			results[i].Err = fmt.Errorf("producer: publish batch record %d: %w", i, err)
			continue
		}
		todo = append(todo, i)
	}
	for attempt := 1; len(todo) > 0; attempt++ {
		r, err := p.usableNow(ctx)
		if err != nil {
			failAll(results, todo, fmt.Errorf("producer: publish batch: %w", err))
			return results
		}
		// A pipeline of commands marked Once is never sent again as a whole;
		// build only makes the commands (see redisconn.SendOnce).
		pipe, build := p.cfg.redis.Pipeline(), p.cfg.redis.Pipeline()
		cmds := make([]*redis.StringCmd, len(todo))
		for j, i := range todo {
			_, key, err := r.route(records[i].PartitionKey)
			if err != nil {
				failAll(results, todo, fmt.Errorf("producer: publish batch: %w", err))
				return results
			}
			results[i].StreamKey = key
			cmds[j] = build.XAdd(ctx, p.xaddArgs(key, records[i].Fields))
			_ = pipe.Process(ctx, redisconn.Once(cmds[j])) // queued; Exec answers
		}
		_, _ = pipe.Exec(ctx) // every command carries its own error
		var stale []int
		for j, i := range todo {
			id, err := cmds[j].Result()
			switch {
			case err == nil:
				results[i].ID, results[i].Err = id, nil
			case errors.Is(err, redis.Nil):
				stale = append(stale, i)
			default:
				results[i].Err = fmt.Errorf("producer: publish to %s: %w", results[i].StreamKey, &sentError{err})
			}
		}
		if len(stale) == 0 {
			break
		}
		if attempt >= p.cfg.maxAttempts {
			for _, i := range stale {
				results[i].Err = fmt.Errorf("producer: publish to %s: %w after %d attempts (routing metadataVersion %d)",
					results[i].StreamKey, ErrShardStreamMissing, attempt, r.metadataVersion)
			}
			break
		}
		p.log.Info("shard streams missing: routing is stale, refreshing", "records", len(stale), "metadataVersion", r.metadataVersion)
		if _, err := p.refresh(ctx, r.gen); err != nil {
			failAll(results, stale, fmt.Errorf("producer: publish batch: shard stream missing and %w", err))
			break
		}
		todo = stale
	}
	return results
}

func failAll(results []Result, idx []int, err error) {
	for _, i := range idx {
		results[i].Err = err
	}
}
