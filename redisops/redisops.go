package redisops

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/actors"
)

// Client runs the coordinator's Redis commands. Safe for concurrent use.
type Client struct {
	rdb redis.UniversalClient
}

var _ actors.StreamRedis = (*Client)(nil)

// Wrap runs the commands on rdb, a standalone or a cluster client, which
// the caller configured (timeouts included). Close closes it.
func Wrap(rdb redis.UniversalClient) *Client { return &Client{rdb: rdb} }

// Close releases the connections.
func (c *Client) Close() error { return c.rdb.Close() }

// Provision implements [actors.StreamRedis.Provision]: XGROUP CREATE key
// group 0 MKSTREAM for every pair, pipelined; BUSYGROUP is a success.
func (c *Client) Provision(ctx context.Context, keys, groups []string) error {
	if len(keys) == 0 || len(groups) == 0 {
		return nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.StatusCmd, 0, len(keys)*len(groups))
	for _, key := range keys {
		for _, group := range groups {
			cmds = append(cmds, pipe.XGroupCreateMkStream(ctx, key, group, "0"))
		}
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	var errs []error
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("redisops: xgroup create on %d keys for %v: %d failed, first: %w", len(keys), groups, len(errs), errs[0])
	}
	return nil
}

// Inspect implements [actors.StreamRedis.Inspect] with XINFO STREAM and
// XINFO GROUPS.
func (c *Client) Inspect(ctx context.Context, key string) (actors.ShardFacts, error) {
	out := actors.ShardFacts{Key: key, Groups: []actors.GroupFacts{}}
	info, err := c.rdb.XInfoStream(ctx, key).Result()
	if isNoSuchKey(err) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("redisops: xinfo stream %s: %w", key, err)
	}
	out.Exists, out.Length, out.LastGeneratedID, out.EntriesAdded = true, info.Length, info.LastGeneratedID, info.EntriesAdded
	out.FirstEntryID, out.LastEntryID = info.FirstEntry.ID, info.LastEntry.ID
	groups, err := c.rdb.XInfoGroups(ctx, key).Result()
	if isNoSuchKey(err) { // deleted between the two calls
		return actors.ShardFacts{Key: key, Groups: []actors.GroupFacts{}}, nil
	}
	if err != nil {
		return out, fmt.Errorf("redisops: xinfo groups %s: %w", key, err)
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, groupFacts(g, info.LastGeneratedID))
	}
	return out, nil
}

// groupFacts is what one XINFO GROUPS row of a stream whose last entry id
// is lastGenerated tells. Its lag is known when Redis gave one (go-redis
// reads Redis's null as -1), except that a lag of 0 counts only when the
// group has been handed the stream's last entry: Redis before 7.0 gives
// no lag at all, which go-redis reads as 0, and a drain proven on that
// would retire a shard whose entries the group never read.
func groupFacts(g redis.XInfoGroup, lastGenerated string) actors.GroupFacts {
	f := actors.GroupFacts{Name: g.Name, Pending: g.Pending, LastDeliveredID: g.LastDeliveredID, EntriesRead: g.EntriesRead}
	if g.Lag > 0 || (g.Lag == 0 && g.LastDeliveredID == lastGenerated) {
		lag := g.Lag
		f.Lag = &lag
	}
	return f
}

// Range implements [actors.StreamRedis.Range] with XRANGE and XREVRANGE.
func (c *Client) Range(ctx context.Context, key, after string, count int64, backward bool) ([]actors.Entry, error) {
	if after != "" && atEnd(after, backward) {
		// Nothing lies after the largest id or before the smallest, and
		// Redis refuses such an exclusive bound instead of answering an
		// empty range.
		return []actors.Entry{}, nil
	}
	var msgs []redis.XMessage
	var err error
	if backward {
		end := "+"
		if after != "" {
			end = "(" + after
		}
		msgs, err = c.rdb.XRevRangeN(ctx, key, end, "-", count).Result()
	} else {
		start := "-"
		if after != "" {
			start = "(" + after
		}
		msgs, err = c.rdb.XRangeN(ctx, key, start, "+", count).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("redisops: range %s: %w", key, err)
	}
	out := make([]actors.Entry, len(msgs))
	for i, m := range msgs {
		out[i] = actors.Entry{ID: m.ID, Fields: m.Values}
	}
	return out, nil
}

// atEnd reports whether entry id is the largest one (forward) or the
// smallest (backward) a stream can hold.
func atEnd(id string, backward bool) bool {
	ms, seq, ok := strings.Cut(id, "-")
	m, errM := strconv.ParseUint(ms, 10, 64)
	q, errQ := strconv.ParseUint(seq, 10, 64)
	if !ok || errM != nil || errQ != nil {
		return false
	}
	if backward {
		return m == 0 && q == 0
	}
	return m == math.MaxUint64 && q == math.MaxUint64
}

func isNoSuchKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such key")
}

// Delete implements [actors.StreamRedis.Delete]: one DEL per key (keys of
// a cluster live in different slots), pipelined.
func (c *Client) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, key := range keys {
		cmds[i] = pipe.Del(ctx, key)
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return fmt.Errorf("redisops: del %s: %w", keys[i], err)
		}
	}
	return nil
}

// DestroyGroup implements [actors.StreamRedis.DestroyGroup]: one XGROUP
// DESTROY per key, pipelined. Redis refuses XGROUP on a missing key; such
// a key holds no group, which is what is asked.
func (c *Client) DestroyGroup(ctx context.Context, keys []string, group string) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, key := range keys {
		cmds[i] = pipe.XGroupDestroy(ctx, key, group)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && !isMissingKey(err) {
			return fmt.Errorf("redisops: xgroup destroy %s %s: %w", keys[i], group, err)
		}
	}
	return nil
}

// SetGroupID implements [actors.StreamRedis.SetGroupID] with XGROUP SETID.
func (c *Client) SetGroupID(ctx context.Context, key, group, id string) error {
	if err := c.rdb.XGroupSetID(ctx, key, group, id).Err(); err != nil {
		return fmt.Errorf("redisops: xgroup setid %s %s %s: %w", key, group, id, err)
	}
	return nil
}

// isMissingKey reports Redis's refusal of an XGROUP subcommand on a key
// that does not exist.
func isMissingKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "requires the key to exist")
}

// Ping implements [actors.StreamRedis.Ping]; on a cluster every master
// must answer.
func (c *Client) Ping(ctx context.Context) error {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
			return fmt.Errorf("redisops: ping cluster: %w", err)
		}
		return nil
	}
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisops: ping: %w", err)
	}
	return nil
}
