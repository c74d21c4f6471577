package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redisconn"
)

// Publish writes one record to the shard of partitionKey and returns the
// stream key and the entry id Redis assigned.
//
// fields is a map[string]any or map[string]string (field order is Go's map
// order), or a []any or []string of field, value pairs (order kept); it must
// not be empty. The record is written with XADD key NOMKSTREAM [MAXLEN ~ N].
// A missing shard stream means the routing is stale: Publish refreshes it
// synchronously and retries, up to WithMaxAttempts attempts, then fails with
// ErrShardStreamMissing. Routing whose lease has passed is refreshed first;
// it fails without writing with ErrRoutingLeaseExpired when that refresh
// fails, ErrNoShards when the stream has no
// shards, ErrNotStarted or ErrClosed. Any other Redis error is returned as
// is (wrapped): the record may or may not have been written. On error
// streamKey is the key last tried, or "".
//
// Every error is classified (see [ErrRetryable], [ErrPossiblyWritten]).
func (p *Producer) Publish(ctx context.Context, partitionKey string, fields any) (streamKey, id string, err error) {
	streamKey, id, err = p.publish(ctx, partitionKey, fields)
	return streamKey, id, classify(err)
}

func (p *Producer) publish(ctx context.Context, partitionKey string, fields any) (streamKey, id string, err error) {
	if err := checkFields(fields); err != nil {
		return "", "", fmt.Errorf("producer: publish: %w", err)
	}
	for attempt := 1; ; attempt++ {
		r, err := p.usableNow(ctx)
		if err != nil {
			return streamKey, "", fmt.Errorf("producer: publish: %w", err)
		}
		_, key, err := r.route(partitionKey)
		if err != nil {
			return streamKey, "", fmt.Errorf("producer: publish: %w", err)
		}
		streamKey = key
		id, err := redisconn.SendOnce(ctx, p.cfg.redis, func(b redis.Pipeliner) *redis.StringCmd {
			return b.XAdd(ctx, p.xaddArgs(key, fields))
		}).Result()
		if err == nil {
			return key, id, nil
		}
		if !errors.Is(err, redis.Nil) {
			return key, "", fmt.Errorf("producer: publish to %s: %w", key, &sentError{err})
		}
		if attempt >= p.cfg.maxAttempts {
			return key, "", fmt.Errorf("producer: publish to %s: %w after %d attempts (routing metadataVersion %d)",
				key, ErrShardStreamMissing, attempt, r.metadataVersion)
		}
		p.log.Info("shard stream missing: routing is stale, refreshing", "streamKey", key, "metadataVersion", r.metadataVersion)
		if _, err := p.refresh(ctx, r.gen); err != nil {
			return key, "", fmt.Errorf("producer: publish to %s: shard stream missing and %w", key, err)
		}
	}
}

// xaddArgs is XADD key NOMKSTREAM [MAXLEN [~] N] * fields.
func (p *Producer) xaddArgs(key string, fields any) *redis.XAddArgs {
	return &redis.XAddArgs{
		Stream:     key,
		NoMkStream: true,
		MaxLen:     p.cfg.maxLen,
		Approx:     p.cfg.maxLen > 0 && p.cfg.approxTrim,
		Values:     fields,
	}
}

// checkFields accepts the field shapes go-redis writes as field value pairs.
func checkFields(fields any) error {
	n := 0
	switch f := fields.(type) {
	case map[string]any:
		n = len(f) * 2
	case map[string]string:
		n = len(f) * 2
	case []any:
		n = len(f)
	case []string:
		n = len(f)
	default:
		return fmt.Errorf("%w: %T; want map[string]any, map[string]string, []any or []string", ErrInvalidFields, fields)
	}
	if n == 0 {
		return fmt.Errorf("%w: no fields", ErrInvalidFields)
	}
	if n%2 != 0 {
		return fmt.Errorf("%w: %d elements; want field, value pairs", ErrInvalidFields, n)
	}
	return nil
}
