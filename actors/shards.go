package actors

import (
	"context"
	"fmt"
	"sort"

	"github.com/rscoord/rscoord/protocol"
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
	if _, err := c.lookup(ctx, prefix, group, false); err != nil {
		return nil, 0, err
	}
	r := c.env.cfg.Redis
	if r == nil {
		return nil, 0, protocol.Errorf(protocol.CodeRedisNotConfigured, "the coordinator runs without --redis: it cannot read shard streams")
	}
	v, err := c.askReply(ctx, c.env.dir.stream(prefix), &shardsMsg{})
	if err != nil {
		return nil, 0, err
	}
	layout := v.(streamLayout)
	out := make([]shardRead, 0, layout.shardCount+len(layout.draining))
	for i := range layout.shardCount {
		out = append(out, shardRead{index: i})
	}
	for _, i := range layout.draining {
		out = append(out, shardRead{index: i, draining: true})
	}
	rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
	defer cancel()
	for i := range out {
		key := protocol.StreamKey(prefix, out[i].index)
		f, err := r.Inspect(rctx, key)
		if err != nil {
			return nil, 0, fmt.Errorf("read shard %s: %w", key, err)
		}
		out[i].facts = f
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
			Owners: owners[rd.index],
		}
		if st.Owners == nil {
			st.Owners = []string{}
		}
		sort.Strings(st.Owners)
		if g := rd.facts.Group(group); g != nil {
			st.Pending, st.Lag = g.Pending, g.Lag
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
