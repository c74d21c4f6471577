package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
)

func shardCountOf(req protocol.CreateRequest, def, most int) (int, error) {
	n := def
	if req.InitialShardCount != nil {
		n = *req.InitialShardCount
	}
	if n < 1 || n > most {
		return 0, protocol.Errorf(protocol.CodeInvalidRequest,
			fmt.Sprintf("initialShardCount %d is outside 1..%d", n, most))
	}
	return n, nil
}

// versionFloorOf validates req's versionFloor.
func versionFloorOf(req protocol.CreateRequest) (int64, error) {
	if f := req.VersionFloor; f < 0 || f > protocol.MaxVersionFloor {
		return 0, protocol.Errorf(protocol.CodeInvalidRequest,
			fmt.Sprintf("versionFloor %d is outside 0..%d", f, protocol.MaxVersionFloor))
	}
	return req.VersionFloor, nil
}

func requireRequestedBy(who string) error {
	if who == "" {
		return protocol.Errorf(protocol.CodeInvalidRequest, "requestedBy must name who asks for this change")
	}
	return nil
}

// createStream creates the stream record and its actor, its layout version
// above floor. It reports created=false when the stream already existed.
func (c *Coordinator) createStream(ctx context.Context, prefix string, shards int, floor int64) (rec persistence.StreamRecord, created bool, err error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if c.env.dir.stream(prefix) != nil {
		return rec, false, nil
	}
	if err := c.stillStopping(prefix); err != nil {
		return rec, false, err
	}
	rec = persistence.StreamRecord{StreamPrefix: prefix, ShardCount: shards, MetadataVersion: max(1, floor+1), CreatedAt: c.env.now()}
	start := time.Now()
	rev, err := c.env.store.SaveStream(ctx, rec, 0)
	c.env.obs.StoreWrite("stream", time.Since(start), err)
	if err != nil {
		if errors.Is(err, persistence.ErrStaleRevision) {
			return rec, false, protocol.Errorf(protocol.CodeStreamPrefixAlreadyExists,
				fmt.Sprintf("stream %q exists in the store but could not be loaded", prefix))
		}
		return rec, false, storeError("create stream", err)
	}
	rec.Revision = rev
	if err := c.spawnStream(ctx, &streamInit{record: rec}); err != nil {
		return rec, false, err
	}
	c.env.log.Info("stream created", slog.String("stream", prefix), slog.Int("shards", shards))
	return rec, true, nil
}

// CreateStream creates a stream with its default group, named like the prefix.
func (c *Coordinator) CreateStream(ctx context.Context, prefix string, req protocol.CreateRequest) (protocol.StreamResponse, error) {
	if err := c.mutating(); err != nil {
		return protocol.StreamResponse{}, err
	}
	if err := validateNames(prefix, prefix); err != nil {
		return protocol.StreamResponse{}, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return protocol.StreamResponse{}, err
	}
	shards, err := shardCountOf(req, c.env.cfg.DefaultShards, c.env.cfg.MaxShards)
	if err != nil {
		return protocol.StreamResponse{}, err
	}
	floor, err := versionFloorOf(req)
	if err != nil {
		return protocol.StreamResponse{}, err
	}
	rec, created, err := c.createStream(ctx, prefix, shards, floor)
	if err != nil {
		return protocol.StreamResponse{}, err
	}
	exists := protocol.Errorf(protocol.CodeStreamPrefixAlreadyExists, fmt.Sprintf("stream %q already exists", prefix))
	if !created {
		// A stream without its default group is a create that stopped
		// while provisioning that group in Redis (or whose default group
		// was deleted since): the same request again finishes it, as the
		// first one's error said. A repeat that asks for another shard
		// count is another request.
		if _, pid, _ := c.env.dir.group(prefix, prefix); pid != nil {
			return protocol.StreamResponse{}, exists
		}
		layout, err := askReply[streamLayout](ctx, c, c.env.dir.stream(prefix), &shardsMsg{})
		if err != nil {
			return protocol.StreamResponse{}, err
		}
		if req.InitialShardCount != nil && *req.InitialShardCount != layout.shardCount {
			return protocol.StreamResponse{}, protocol.Errorf(protocol.CodeStreamPrefixAlreadyExists,
				fmt.Sprintf("stream %q already exists with %d shards", prefix, layout.shardCount))
		}
		rec.ShardCount, rec.MetadataVersion = layout.shardCount, layout.metadataVersion
	}
	// mustCreate when resuming: of two repeats at once, one finishes the
	// create and the other is told the stream exists.
	if _, err := askReply[ensured](ctx, c, c.env.dir.stream(prefix), &ensureGroupMsg{name: prefix, mustCreate: !created, floor: floor}); err != nil {
		var perr *protocol.Error
		if errors.As(err, &perr) && perr.Code == protocol.CodeGroupAlreadyExists {
			return protocol.StreamResponse{}, exists
		}
		return protocol.StreamResponse{}, fmt.Errorf("register default group: %w", err)
	}
	return protocol.StreamResponse{StreamPrefix: prefix, ShardCount: rec.ShardCount, MetadataVersion: rec.MetadataVersion}, nil
}

// CreateGroup registers a consumer group, creating its stream when missing.
func (c *Coordinator) CreateGroup(ctx context.Context, prefix, group string, req protocol.CreateRequest) (protocol.GroupResponse, error) {
	if err := c.mutating(); err != nil {
		return protocol.GroupResponse{}, err
	}
	if err := validateNames(prefix, group); err != nil {
		return protocol.GroupResponse{}, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return protocol.GroupResponse{}, err
	}
	shards, err := shardCountOf(req, c.env.cfg.DefaultShards, c.env.cfg.MaxShards)
	if err != nil {
		return protocol.GroupResponse{}, err
	}
	floor, err := versionFloorOf(req)
	if err != nil {
		return protocol.GroupResponse{}, err
	}
	if _, _, err := c.createStream(ctx, prefix, shards, floor); err != nil {
		return protocol.GroupResponse{}, err
	}
	v, err := askReply[ensured](ctx, c, c.env.dir.stream(prefix), &ensureGroupMsg{name: group, mustCreate: true, floor: floor})
	if err != nil {
		return protocol.GroupResponse{}, err
	}
	return v.summary, nil
}

// DeleteGroup deletes a group; live members make it a conflict unless forced.
func (c *Coordinator) DeleteGroup(ctx context.Context, prefix, group string, req protocol.DeleteGroupRequest) (protocol.GroupResponse, error) {
	if err := c.mutating(); err != nil {
		return protocol.GroupResponse{}, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return protocol.GroupResponse{}, err
	}
	summary, err := groupAsk[protocol.GroupResponse](ctx, c, prefix, group, &deleteGroupMsg{force: req.Force})
	if err != nil {
		return summary, err
	}
	if _, err := askReply[struct{}](ctx, c, c.env.dir.stream(prefix), &groupDeletedMsg{name: group}); err != nil {
		return summary, err
	}
	c.env.log.Info("group deleted", slog.String("stream", prefix), slog.String("group", group),
		slog.String("by", req.RequestedBy), slog.Bool("force", req.Force))
	c.destroyRedisGroup(ctx, prefix, group)
	return summary, nil
}

// destroyRedisGroup removes a deleted group's Redis consumer group from
// every shard key any layout of the stream had: left there, it would
// hold pending entries nobody claims, and a later scale-in's drain proof,
// which counts every consumer group on a removed key, would wait on it
// forever. The group is deleted already, so a failure is logged with
// what the operator must run, not answered.
func (c *Coordinator) destroyRedisGroup(ctx context.Context, prefix, group string) {
	r := c.env.cfg.Redis
	if r == nil {
		return
	}
	layout, err := askReply[streamLayout](ctx, c, c.env.dir.stream(prefix), &shardsMsg{})
	if err == nil {
		keys := make([]string, layout.spanned)
		for i := range keys {
			keys[i] = protocol.StreamKey(prefix, i)
		}
		rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
		err = r.DestroyGroup(rctx, keys, group)
		cancel()
	}
	if err != nil {
		c.env.log.Warn("deleted group's Redis consumer groups not destroyed: run XGROUP DESTROY on each shard key",
			slog.String("stream", prefix), slog.String("group", group), slog.Any("error", err))
	}
}

// Scale starts a stream-wide resharding to req.TargetShardCount.
func (c *Coordinator) Scale(ctx context.Context, prefix string, req protocol.ScaleRequest) (protocol.ScaleResponse, error) {
	if err := c.mutating(); err != nil {
		return protocol.ScaleResponse{}, err
	}
	pid, err := c.streamPID(prefix)
	if err != nil {
		return protocol.ScaleResponse{}, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return protocol.ScaleResponse{}, err
	}
	if req.TargetShardCount == nil {
		return protocol.ScaleResponse{}, protocol.Errorf(protocol.CodeInvalidRequest, "targetShardCount is required")
	}
	if n := *req.TargetShardCount; n < 0 || n > c.env.cfg.MaxShards {
		return protocol.ScaleResponse{}, protocol.Errorf(protocol.CodeInvalidRequest,
			fmt.Sprintf("targetShardCount %d is outside 0..%d", n, c.env.cfg.MaxShards))
	}
	return askReply[protocol.ScaleResponse](ctx, c, pid, &scaleMsg{req: req})
}

// Migrations lists the stream's migrations as seen by one group.
func (c *Coordinator) Migrations(ctx context.Context, prefix, group string) (protocol.MigrationsResponse, error) {
	if _, err := c.lookup(ctx, prefix, group, nil); err != nil {
		return protocol.MigrationsResponse{}, err
	}
	return askReply[protocol.MigrationsResponse](ctx, c, c.env.dir.stream(prefix), &migrationsMsg{})
}

// Migration finds one migration by id.
func (c *Coordinator) Migration(ctx context.Context, prefix, group, id string) (protocol.Migration, error) {
	all, err := c.Migrations(ctx, prefix, group)
	if err != nil {
		return protocol.Migration{}, err
	}
	for _, m := range all.Migrations {
		if m.ReshardingID == id {
			return m, nil
		}
	}
	return protocol.Migration{}, migrationNotFound(prefix, id)
}

// Rollback rolls back an ACTIVE migration; a repeated rollback answers the
// same record.
func (c *Coordinator) Rollback(ctx context.Context, prefix, group, id string, req protocol.OperatorRequest) (protocol.Migration, error) {
	if err := c.mutating(); err != nil {
		return protocol.Migration{}, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return protocol.Migration{}, err
	}
	if _, err := c.lookup(ctx, prefix, group, nil); err != nil {
		return protocol.Migration{}, err
	}
	return askReply[protocol.Migration](ctx, c, c.env.dir.stream(prefix), &rollbackMsg{id: id, req: req})
}

// Complete lets an operator retire the removed shards of a migration whose
// drain cannot be proven.
func (c *Coordinator) Complete(ctx context.Context, prefix, id string, req protocol.OperatorRequest) (protocol.Migration, error) {
	if err := c.mutating(); err != nil {
		return protocol.Migration{}, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return protocol.Migration{}, err
	}
	pid, err := c.streamPID(prefix)
	if err != nil {
		return protocol.Migration{}, err
	}
	return askReply[protocol.Migration](ctx, c, pid, &completeMsg{id: id, req: req})
}
