package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
)

// Group describes one group.
func (c *Coordinator) Group(ctx context.Context, prefix, group string) (protocol.GroupResponse, error) {
	return groupAsk[protocol.GroupResponse](ctx, c, prefix, group, &getGroupMsg{})
}

// Members lists a group's members.
func (c *Coordinator) Members(ctx context.Context, prefix, group string) (protocol.MembersResponse, error) {
	members, err := groupAsk[[]protocol.Member](ctx, c, prefix, group, &membersMsg{})
	return protocol.MembersResponse{Members: members}, err
}

// Assignments shows a group's target and current assignment.
func (c *Coordinator) Assignments(ctx context.Context, prefix, group string) (protocol.AssignmentsResponse, error) {
	return groupAsk[protocol.AssignmentsResponse](ctx, c, prefix, group, &assignmentsMsg{})
}

// Consumption lists every member's reported progress per shard.
func (c *Coordinator) Consumption(ctx context.Context, prefix, group string) (protocol.ConsumptionResponse, error) {
	rows, err := groupAsk[[]protocol.ConsumptionRow](ctx, c, prefix, group, &consumptionMsg{})
	return protocol.ConsumptionResponse{Progress: rows}, err
}

// ProducerRouting tells a producer the stream's live shards. An unknown
// group of a known stream is registered when auto-create is on and the
// caller may register one (mayRegister: the gateway's judgement of its
// roles); otherwise it is GROUP_NOT_FOUND.
func (c *Coordinator) ProducerRouting(ctx context.Context, prefix, group string, mayRegister bool) (protocol.ProducerRoutingResponse, error) {
	var fly *onTheFly
	if c.env.cfg.AutoCreateGroups && mayRegister {
		fly = &onTheFly{by: callerOf(ctx), via: viaRouting}
	}
	pid, err := c.lookup(ctx, prefix, group, fly)
	if err != nil {
		return protocol.ProducerRoutingResponse{}, err
	}
	routing, err := askReply[protocol.ProducerRoutingResponse](ctx, c, pid, &routingMsg{})
	if err != nil {
		return protocol.ProducerRoutingResponse{}, err
	}
	routing.RoutingLeaseMs = c.env.cfg.ProducerRoutingLease.Milliseconds()
	if err := c.ensureRouted(ctx, routing); err != nil {
		return protocol.ProducerRoutingResponse{}, err
	}
	return routing, nil
}

// ensureRouted makes, with Redis configured, every shard stream of routing
// and the group's Redis consumer group exist (docs/protocol.md §5). It runs in
// the caller's goroutine, never inside an actor, and once per group and
// metadata version: producers refresh every few seconds.
func (c *Coordinator) ensureRouted(ctx context.Context, routing protocol.ProducerRoutingResponse) error {
	r := c.env.cfg.Redis
	if r == nil || len(routing.Shards) == 0 {
		return nil
	}
	key := routing.StreamPrefix + "\x00" + routing.ConsumerGroup
	c.routedMu.Lock()
	done := c.routed[key] == routing.MetadataVersion
	c.routedMu.Unlock()
	if done {
		return nil
	}
	keys := make([]string, len(routing.Shards))
	for i, sh := range routing.Shards {
		keys[i] = sh.StreamKey
	}
	rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
	defer cancel()
	if err := r.Provision(rctx, keys, []string{routing.ConsumerGroup}); err != nil {
		return fmt.Errorf("producer routing of %s/%s: provision: %w", routing.StreamPrefix, routing.ConsumerGroup, errors.Join(provisioningFailed(err), err))
	}
	c.routedMu.Lock()
	c.routed[key] = routing.MetadataVersion
	c.routedMu.Unlock()
	return nil
}

// Groups describes every group that can answer; groups that failed closed
// are left out here and reported by Health. Once ctx is done it answers
// with the groups that answered by then, and ctx's error.
func (c *Coordinator) Groups(ctx context.Context) (protocol.GroupsResponse, error) {
	out := protocol.GroupsResponse{Groups: []protocol.GroupResponse{}, Streams: []protocol.StreamSummary{}}
	// The asks time out at ctx's deadline too: nobody waits for their
	// answers past it, and their futures should not outlive it.
	timeout := c.env.cfg.AskTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("list groups: %w", err)
	}
	if timeout <= 0 {
		return out, fmt.Errorf("list groups: %w", context.DeadlineExceeded)
	}
	refs := c.env.dir.allGroups()
	futures := make([]*actor.Future, len(refs))
	for i, ref := range refs {
		futures[i] = c.env.system.Root.RequestFuture(ref.pid, &getGroupMsg{}, timeout)
	}
	for i, f := range futures {
		// A cancelled ctx ends the wait early; the asks left end on their
		// own, by their timeout at the latest.
		if waitFuture(ctx, c.env.system, f) != nil && ctx.Err() != nil {
			return out, fmt.Errorf("list groups: %w", ctx.Err())
		}
		group, err := resultOf[protocol.GroupResponse](f)
		if err != nil {
			c.env.log.Warn("group left out of the list", slog.String("stream", refs[i].prefix),
				slog.String("group", refs[i].name), slog.Any("error", err))
			continue
		}
		out.Groups = append(out.Groups, group)
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("list groups: %w", err)
	}
	out.Streams = c.streamSummaries(ctx, timeout)
	return out, nil
}

// streamSummaries describes every stream that answers within timeout,
// sorted by prefix; one that does not (failed closed, stopping) is left
// out, as its groups are.
func (c *Coordinator) streamSummaries(ctx context.Context, timeout time.Duration) []protocol.StreamSummary {
	prefixes := c.env.dir.prefixes()
	futures := make([]*actor.Future, 0, len(prefixes))
	for _, p := range prefixes {
		if pid := c.env.dir.stream(p); pid != nil {
			futures = append(futures, c.env.system.Root.RequestFuture(pid, &shardsMsg{}, timeout))
		} else {
			futures = append(futures, nil)
		}
	}
	out := make([]protocol.StreamSummary, 0, len(prefixes))
	for i, f := range futures {
		if f == nil || (waitFuture(ctx, c.env.system, f) != nil && ctx.Err() != nil) {
			continue
		}
		l, err := resultOf[streamLayout](f)
		if err != nil {
			continue
		}
		out = append(out, protocol.StreamSummary{StreamPrefix: prefixes[i], ShardCount: l.shardCount,
			MetadataVersion: l.metadataVersion, ActiveMigration: l.active})
	}
	return out
}

// Health reports the coordinator's state: DEGRADED while any group failed
// closed or configured Redis does not answer, DOWN once shutdown has begun.
func (c *Coordinator) Health(ctx context.Context) protocol.Health {
	h := protocol.Health{
		Status:        protocol.HealthUp,
		CoordinatorID: c.env.cfg.CoordinatorID,
		RedisDetail:   protocol.ComponentHealth{Status: protocol.HealthNotConfigured, Message: "no --redis given: no provisioning and no drain proofs"},
		LoopDetail:    protocol.ComponentHealth{Status: protocol.HealthUp},
		Store:         protocol.ComponentHealth{Status: protocol.HealthUp},
	}
	if r := c.env.cfg.Redis; r != nil {
		pctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
		err := r.Ping(pctx)
		cancel()
		if err != nil {
			h.Status = protocol.HealthDegraded
			h.RedisDetail = protocol.ComponentHealth{Status: protocol.HealthDown, Message: err.Error()}
		} else {
			h.RedisDetail = protocol.ComponentHealth{Status: protocol.HealthUp}
		}
	}
	if failed := c.env.failed.list(); len(failed) > 0 {
		h.Status = protocol.HealthDegraded
		h.Store = protocol.ComponentHealth{Status: protocol.HealthDegraded,
			Message: fmt.Sprintf("%d groups failed closed: %v", len(failed), failed)}
	}
	if degraded, reason := c.env.store.Health(); degraded {
		h.Status = protocol.HealthDegraded
		h.Store = protocol.ComponentHealth{Status: protocol.HealthDegraded, Message: reason}
	}
	// Err also lets a failed store try to recover.
	if err := c.env.store.Err(ctx); err != nil {
		h.Status = protocol.HealthDegraded
		h.Store = protocol.ComponentHealth{Status: protocol.HealthDown, Message: err.Error()}
	}
	if c.Terminating() {
		h.Status = protocol.HealthDown
		h.LoopDetail = protocol.ComponentHealth{Status: protocol.HealthDown, Message: "shutting down"}
	}
	h.Redis, h.Loop = h.RedisDetail.Status, h.LoopDetail.Status
	return h
}

// redisPingTimeout bounds the Redis check of a health request.
const redisPingTimeout = time.Second
