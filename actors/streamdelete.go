package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// deletePlan is what a stream delete removes, as the stream actor sees it.
type deletePlan struct {
	groups     []string
	migration  string
	shardCount int
	spanned    int
}

// DeleteStream deletes a stream (ours). While the stream has groups it is
// refused (STREAM_HAS_GROUPS), and while a migration is active too
// (ACTIVE_MIGRATION_EXISTS), unless forced: force deletes every group
// first exactly as a forced group delete does, so that their members are
// told the group is gone and stop reading, and drops the migration with
// the stream record. deleteKeys also deletes every shard key of the
// widest layout the stream had from Redis, before the record, so that a
// Redis failure leaves a stream the same request can delete again.
func (c *Coordinator) DeleteStream(ctx context.Context, prefix string, req protocol.DeleteStreamRequest) (protocol.DeleteStreamResponse, error) {
	var resp protocol.DeleteStreamResponse
	if err := c.mutating(); err != nil {
		return resp, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return resp, err
	}
	r := c.env.cfg.Redis
	if req.DeleteKeys && r == nil {
		return resp, protocol.Errorf(protocol.CodeRedisNotConfigured, "deleteKeys needs Redis: start the coordinator with --redis")
	}
	// createMu keeps creates, loads and drops of streams out while the
	// stream goes away.
	c.createMu.Lock()
	defer c.createMu.Unlock()
	pid, err := c.streamPID(prefix)
	if err != nil {
		return resp, err
	}
	plan, err := askReply[deletePlan](ctx, c, pid, &deletePlanMsg{})
	if err != nil {
		return resp, err
	}
	if len(plan.groups) > 0 && !req.Force {
		return resp, protocol.Errorf(protocol.CodeStreamHasGroups,
			fmt.Sprintf("stream %q has %d consumer groups (%v); delete them first or delete the stream with force", prefix, len(plan.groups), plan.groups))
	}
	if plan.migration != "" && !req.Force {
		return resp, protocol.Errorf(protocol.CodeActiveMigrationExists,
			fmt.Sprintf("stream %q has the active migration %s; finish or roll it back first, or delete the stream with force (the migration is dropped with it)", prefix, plan.migration))
	}
	resp = protocol.DeleteStreamResponse{StreamPrefix: prefix, ShardCount: plan.shardCount,
		DeletedGroups: []string{}, DroppedMigration: plan.migration, DeletedKeys: []string{}}
	for _, g := range plan.groups {
		if err := c.deleteGroupOf(ctx, prefix, g, !req.DeleteKeys); err != nil {
			return resp, err
		}
		resp.DeletedGroups = append(resp.DeletedGroups, g)
	}
	if req.DeleteKeys {
		keys := make([]string, plan.spanned)
		for i := range keys {
			keys[i] = protocol.StreamKey(prefix, i)
		}
		rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
		err := r.Delete(rctx, keys...)
		cancel()
		if err != nil {
			return resp, fmt.Errorf("delete stream %s: %w", prefix, errors.Join(protocol.Errorf(protocol.CodeRedisUnavailable,
				"the shard keys could not be deleted; the stream is kept, and its groups are deleted: retry"), err))
		}
		resp.DeletedKeys = keys
	}
	if _, err := askReply[struct{}](ctx, c, pid, &deleteStreamMsg{}); err != nil {
		return resp, err
	}
	if err := c.dropStream(ctx, prefix); err != nil {
		return resp, err
	}
	c.env.dir.forget(prefix)
	c.env.log.Info("stream deleted", slog.String("stream", prefix), slog.String("by", req.RequestedBy),
		slog.Bool("force", req.Force), slog.Int("groups", len(resp.DeletedGroups)), slog.Int("keys", len(resp.DeletedKeys)))
	return resp, nil
}

// deleteGroupOf deletes one group of a stream being deleted, forced, as
// DeleteGroup does; a group deleted meanwhile is no error.
func (c *Coordinator) deleteGroupOf(ctx context.Context, prefix, group string, destroy bool) error {
	_, err := groupAsk[protocol.GroupResponse](ctx, c, prefix, group, &deleteGroupMsg{force: true})
	var perr *protocol.Error
	if err != nil && !(errors.As(err, &perr) && perr.Code == protocol.CodeGroupNotFound) {
		return fmt.Errorf("delete group %s of stream %s: %w", group, prefix, err)
	}
	if _, err := askReply[struct{}](ctx, c, c.env.dir.stream(prefix), &groupDeletedMsg{name: group}); err != nil {
		return err
	}
	if destroy {
		c.destroyRedisGroup(ctx, prefix, group)
	}
	return nil
}

// deletePlan answers deletePlanMsg.
func (s *streamActor) deletePlan() reply[deletePlan] {
	if err := s.unavailable(); err != nil {
		return reply[deletePlan]{err: err}
	}
	p := deletePlan{groups: make([]string, 0, len(s.groups)), shardCount: s.rec.ShardCount, spanned: s.spanned()}
	for name := range s.groups {
		p.groups = append(p.groups, name)
	}
	sort.Strings(p.groups)
	if m := s.activeMigration(); m != nil {
		p.migration = m.ReshardingID
	}
	return reply[deletePlan]{value: p}
}

// deleteRecord deletes the stream record once no group is left. A group
// registered since the plan was made refuses the delete, as does a
// migration step running beside the actor (it would write the record).
func (s *streamActor) deleteRecord() error {
	if err := s.unavailable(); err != nil {
		return err
	}
	if len(s.groups) > 0 || len(s.registering) > 0 {
		return protocol.Errorf(protocol.CodeStreamHasGroups,
			fmt.Sprintf("a consumer group of stream %q was registered meanwhile; retry", s.prefix))
	}
	if s.stepping {
		return protocol.Errorf(protocol.CodeActiveMigrationExists,
			fmt.Sprintf("a migration step of stream %q is running; retry", s.prefix))
	}
	sctx, cancel := s.env.storeContext()
	defer cancel()
	start := time.Now()
	err := s.env.store.DeleteStream(sctx, s.prefix, s.rec.Revision)
	s.env.obs.StoreWrite("stream", time.Since(start), err)
	if err != nil {
		return storeError("delete stream", err)
	}
	s.deleted = true
	s.stopTimer()
	s.auto.stop()
	return nil
}
