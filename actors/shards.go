package actors

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/clienttext"
)

// shardRead is one readable shard with its live Redis facts.
type shardRead struct {
	index    int
	draining bool
	facts    ShardFacts
}

// readShards lists the stream's readable shards (live, then draining) with
// what Redis says of each. It runs in the caller's goroutine: Redis I/O
// never holds up an actor. Without Redis it answers 503
// REDIS_NOT_CONFIGURED.
func (c *Coordinator) readShards(ctx context.Context, prefix, group string) ([]shardRead, int, error) {
	out, count, err := c.readableShards(ctx, prefix, group)
	if err != nil {
		return nil, 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
	defer cancel()
	for i := range out {
		key := protocol.StreamKey(prefix, out[i].index)
		f, err := c.env.cfg.Redis.Inspect(rctx, key)
		if err != nil {
			return nil, 0, redisUnavailable(key, err)
		}
		out[i].facts = f
	}
	return out, count, nil
}

// readableShards lists the stream's readable shards (live, then draining)
// without reading Redis, and the live shard count. It fails when the group
// is unknown or Redis is not configured.
func (c *Coordinator) readableShards(ctx context.Context, prefix, group string) ([]shardRead, int, error) {
	if _, err := c.lookup(ctx, prefix, group, nil); err != nil {
		return nil, 0, err
	}
	if c.env.cfg.Redis == nil {
		return nil, 0, protocol.Errorf(protocol.CodeRedisNotConfigured, "the coordinator runs without --redis: it cannot read shard streams")
	}
	layout, err := askReply[streamLayout](ctx, c, c.env.dir.stream(prefix), &shardsMsg{})
	if err != nil {
		return nil, 0, err
	}
	out := make([]shardRead, 0, layout.shardCount+len(layout.draining))
	for i := range layout.shardCount {
		out = append(out, shardRead{index: i})
	}
	for _, i := range layout.draining {
		out = append(out, shardRead{index: i, draining: true})
	}
	return out, layout.shardCount, nil
}

// Shards shows every readable shard of the stream as Redis shows it now,
// with this group's pending count and lag and the members owning it.
func (c *Coordinator) Shards(ctx context.Context, prefix, group string) (protocol.ShardsResponse, error) {
	reads, count, err := c.readShards(ctx, prefix, group)
	if err != nil {
		return protocol.ShardsResponse{}, err
	}
	asg, err := c.Assignments(ctx, prefix, group)
	if err != nil {
		return protocol.ShardsResponse{}, err
	}
	owners := map[int][]string{}
	for member, shards := range asg.CurrentAssignments {
		for _, sh := range shards {
			owners[sh.ShardIndex] = append(owners[sh.ShardIndex], member)
		}
	}
	out := protocol.ShardsResponse{StreamPrefix: prefix, ConsumerGroup: group, ShardCount: count, Shards: make([]protocol.ShardState, 0, len(reads))}
	for _, rd := range reads {
		key := protocol.StreamKey(prefix, rd.index)
		st := protocol.ShardState{
			ShardIndex: rd.index, StreamKey: key, RedisSlot: protocol.RedisSlot(key), Draining: rd.draining,
			Exists: rd.facts.Exists, Length: rd.facts.Length, LastGeneratedID: rd.facts.LastGeneratedID,
			FirstRecordID: rd.facts.FirstEntryID, LastRecordID: rd.facts.LastEntryID, Owners: owners[rd.index],
		}
		if st.Owners == nil {
			st.Owners = []string{}
		}
		sort.Strings(st.Owners)
		if g := rd.facts.Group(group); g != nil {
			st.Pending, st.Lag, st.GroupLastDeliveredID = g.Pending, g.Lag, g.LastDeliveredID
		}
		out.Shards = append(out.Shards, st)
	}
	return out, nil
}

// Offsets shows where the group stands on every readable shard.
func (c *Coordinator) Offsets(ctx context.Context, prefix, group string) (protocol.OffsetsResponse, error) {
	reads, _, err := c.readShards(ctx, prefix, group)
	if err != nil {
		return protocol.OffsetsResponse{}, err
	}
	out := protocol.OffsetsResponse{StreamPrefix: prefix, ConsumerGroup: group, Offsets: make([]protocol.ShardOffset, 0, len(reads))}
	for _, rd := range reads {
		o := protocol.ShardOffset{ShardIndex: rd.index, StreamKey: protocol.StreamKey(prefix, rd.index), LastGeneratedID: rd.facts.LastGeneratedID}
		if g := rd.facts.Group(group); g != nil {
			o.LastDeliveredID, o.EntriesRead, o.Pending, o.Lag = g.LastDeliveredID, g.EntriesRead, g.Pending, g.Lag
		}
		out.Offsets = append(out.Offsets, o)
	}
	return out, nil
}

// Messages reads one page of a readable shard's entries after (FORWARD) or
// before (BACKWARD) the entry id cursor, for dashboards. It reads with
// XRANGE, never through a consumer group, so nothing is delivered or
// acknowledged.
func (c *Coordinator) Messages(ctx context.Context, prefix, group string, shard int, cursor string, limit int, direction string) (protocol.MessagesResponse, error) {
	var zero protocol.MessagesResponse
	if direction == "" {
		direction = protocol.DirectionForward
	}
	if direction != protocol.DirectionForward && direction != protocol.DirectionBackward {
		return zero, protocol.Errorf(protocol.CodeInvalidRequest, fmt.Sprintf("direction %s is neither FORWARD nor BACKWARD", clienttext.Quote(direction)))
	}
	if limit < 1 || limit > protocol.MaxMessagesPage {
		return zero, protocol.Errorf(protocol.CodeInvalidRequest, fmt.Sprintf("limit %d is outside 1..%d", limit, protocol.MaxMessagesPage))
	}
	if cursor != "" && !validEntryID(cursor) {
		return zero, protocol.Errorf(protocol.CodeInvalidRequest, fmt.Sprintf("cursor %s is not a stream entry id (ms-seq)", clienttext.Quote(cursor)))
	}
	reads, _, err := c.readableShards(ctx, prefix, group)
	if err != nil {
		return zero, err
	}
	known := false
	for _, rd := range reads {
		known = known || rd.index == shard
	}
	if !known {
		return zero, protocol.Errorf(protocol.CodeInvalidRequest, fmt.Sprintf("shard %d is not a readable shard of stream %q", shard, prefix))
	}
	key := protocol.StreamKey(prefix, shard)
	rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
	defer cancel()
	// One entry more than asked tells whether another page follows.
	entries, err := c.env.cfg.Redis.Range(rctx, key, cursor, int64(limit)+1, direction == protocol.DirectionBackward)
	if err != nil {
		return zero, redisUnavailable(key, err)
	}
	out := protocol.MessagesResponse{StreamPrefix: prefix, ConsumerGroup: group, ShardIndex: shard, StreamKey: key,
		Direction: direction, Messages: make([]protocol.StreamMessage, 0, min(len(entries), limit))}
	for i, e := range entries {
		if i == limit {
			next := out.Messages[limit-1].ID
			out.NextCursor = &next
			break
		}
		fields := e.Fields
		if fields == nil {
			fields = map[string]any{}
		}
		out.Messages = append(out.Messages, protocol.StreamMessage{ID: e.ID, Fields: fields})
	}
	return out, nil
}

// redisUnavailable marks a failed Redis read of key: the client's request
// was fine, Redis did not answer or refused, so it is answered 503
// REDIS_UNAVAILABLE, with err kept for the server's log. A refusal (a key
// that is not a stream, say) is named with the key, since no retry mends
// it.
func redisUnavailable(key string, err error) error {
	msg := "Redis did not answer the read; retry later"
	if reply, ok := redisRefusal(err); ok {
		msg = fmt.Sprintf("Redis refused the read of %s: %s", key, reply)
	}
	return errors.Join(protocol.Errorf(protocol.CodeRedisUnavailable, msg), fmt.Errorf("read %s: %w", key, err))
}

// validEntryID checks the "ms-seq" shape of a stream entry id, both parts
// decimal numbers Redis can hold (64 bits), so that a cursor can never
// become another XRANGE argument nor an id Redis refuses.
func validEntryID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	return ok && isUint64(ms) && isUint64(seq)
}

func isUint64(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64) // digits only: no sign, no '_'
	return err == nil
}
