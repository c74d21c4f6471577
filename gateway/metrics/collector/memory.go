package collector

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// RedisMemory reads MEMORY USAGE through rdb, one pipeline per call.
// Redis estimates a stream's size from a sample of its nodes (its
// default of 5), so the cost of a key does not grow with its length.
func RedisMemory(rdb redis.UniversalClient) Memory { return redisMemory{rdb} }

type redisMemory struct{ rdb redis.UniversalClient }

func (r redisMemory) MemoryUsage(ctx context.Context, keys []string) ([]int64, error) {
	cmds := make([]*redis.IntCmd, len(keys))
	// The pipeline's own error is the first command's; each command's is
	// read below, where a missing key (a nil reply) is no error.
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.MemoryUsage(ctx, k)
		}
		return nil
	})
	out := make([]int64, len(keys))
	for i, c := range cmds {
		v, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[i] = -1
		case err != nil:
			return nil, fmt.Errorf("MEMORY USAGE %s: %w", keys[i], err)
		default:
			out[i] = v
		}
	}
	return out, nil
}
