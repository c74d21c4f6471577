package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
)

// Coordinator is the running coordinator: an actor system holding one stream
// actor per stream prefix and one group actor per consumer group. Its methods
// are safe for concurrent use; each sends a message to the actor that owns
// the state and waits for the answer. Errors meant for clients are
// *protocol.Error (possibly wrapped).
type Coordinator struct {
	env *env
	// createMu serializes stream creation, the only change that is not
	// owned by an existing actor.
	createMu  sync.Mutex
	closeOnce sync.Once

	// routed remembers, per "prefix\x00group", the metadata version whose
	// shard streams producer routing last made sure exist in Redis.
	routedMu sync.Mutex
	routed   map[string]int64

	// running maps each stream whose actor was spawned to a channel closed
	// once that actor stopped for good; dropping moves it to stopping,
	// until it closes. Guarded by createMu.
	running, stopping map[string]chan struct{}
}

// Start restores every stream and group from cfg.Store and starts their
// actors. Groups whose snapshots cannot be read start failed closed; the
// rest serve normally.
func Start(ctx context.Context, cfg Config) (*Coordinator, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("start coordinator: %w", err)
	}
	logger := cfg.Logger
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logger.With(slog.String("component", "protoactor"))
	}))
	if cfg.CoordinatorID == "" {
		cfg.CoordinatorID = "rscoord-" + system.ID
	}
	closing, stopClosing := context.WithCancel(context.Background())
	c := &Coordinator{env: &env{
		cfg: cfg, store: cfg.Store, system: system, log: logger,
		dir: newDirectory(), failed: newFailedGroups(), obs: cfg.Observer,
		closing: closing, stopClosing: stopClosing, groupCoolDown: groupRestartWindow,
	}, routed: map[string]int64{}, running: map[string]chan struct{}{}, stopping: map[string]chan struct{}{}}
	if cfg.Placed {
		logger.Info("coordinator started; streams are added as this replica claims them", slog.String("coordinatorId", cfg.CoordinatorID))
		return c, nil
	}
	streams, err := cfg.Store.LoadStreams(ctx)
	if err != nil {
		stopClosing()
		system.Shutdown()
		return nil, fmt.Errorf("start coordinator: load streams: %w", err)
	}
	for _, rec := range streams {
		groups, err := cfg.Store.LoadGroups(ctx, rec.StreamPrefix)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("start coordinator: load groups of %s: %w", rec.StreamPrefix, err), c.shutdownActors(ctx))
		}
		if err := c.spawnStream(ctx, &streamInit{record: rec, groups: groups}); err != nil {
			return nil, errors.Join(fmt.Errorf("start coordinator: %w", err), c.shutdownActors(ctx))
		}
	}
	logger.Info("coordinator started", slog.String("coordinatorId", cfg.CoordinatorID), slog.Int("streams", len(streams)))
	return c, nil
}

// spawnStream starts a stream actor and waits until it has spawned its
// groups, so that no request finds a known stream with its groups missing.
func (c *Coordinator) spawnStream(ctx context.Context, init *streamInit) error {
	prefix := init.record.StreamPrefix
	stopped := make(chan struct{})
	c.running[prefix] = stopped
	props := actor.PropsFromProducer(newStreamActor(c.env, prefix, init, stopped), actor.WithSupervisor(groupSupervision))
	pid := c.env.system.Root.SpawnPrefix(props, "stream-"+prefix+"-")
	c.env.dir.putStream(prefix, pid, init.record.Err)
	if init.record.Err != nil {
		c.env.failed.remember(prefix, "*", init.record.Err)
	}
	if _, err := askReply[struct{}](ctx, c, pid, &readyMsg{}); err != nil {
		return fmt.Errorf("start stream %s: %w", prefix, err)
	}
	return nil
}

// AddStream loads one stream and its groups from the store and starts
// their actors, unless the stream runs already (cluster mode: this replica
// just claimed it, so no write of the previous owner can follow the load).
// Loaded groups give every member a fresh lease, as after a restart. A
// stream the store does not hold is no error: nothing starts, and a later
// create makes it here. While actors of a dropped run of the stream have
// not stopped yet, it is refused (STORE_UNAVAILABLE: retry).
func (c *Coordinator) AddStream(ctx context.Context, prefix string) error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if c.env.dir.stream(prefix) != nil {
		return nil
	}
	if err := c.stillStopping(prefix); err != nil {
		return err
	}
	streams, err := c.env.store.LoadStreams(ctx)
	if err != nil {
		return fmt.Errorf("add stream %s: load streams: %w", prefix, err)
	}
	for _, rec := range streams {
		if rec.StreamPrefix != prefix {
			continue
		}
		var groups []persistence.GroupRecord
		if rec.Err == nil {
			if groups, err = c.env.store.LoadGroups(ctx, prefix); err != nil {
				return fmt.Errorf("add stream %s: load groups: %w", prefix, err)
			}
		}
		if err := c.spawnStream(ctx, &streamInit{record: rec, groups: groups}); err != nil {
			return errors.Join(fmt.Errorf("add stream: %w", err), c.dropStream(ctx, prefix))
		}
		c.env.log.Info("stream loaded", slog.String("stream", prefix), slog.Int("groups", len(groups)))
		return nil
	}
	return nil
}

// DropStream stops the actors of one stream and its groups, each after the
// message it is handling (held heartbeats are answered RETRY), and forgets
// them: requests for the stream answer STREAM_NOT_FOUND here from then on,
// and the caller routes them elsewhere (cluster mode: another replica
// claims the stream). It waits at most until ctx ends.
func (c *Coordinator) DropStream(ctx context.Context, prefix string) error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	return c.dropStream(ctx, prefix)
}

// stillStopping refuses to start prefix again while actors of a dropped
// run of it have not stopped (DropStream's wait ended first). In the
// cluster mode the replica may hold the stream's owner key anew by then,
// and the store fences writes by that key only: the old actors' late
// writes would carry the new claim, two actors deciding for one group.
// The caller holds createMu.
func (c *Coordinator) stillStopping(prefix string) error {
	done, ok := c.stopping[prefix]
	if !ok {
		return nil
	}
	select {
	case <-done:
		delete(c.stopping, prefix)
		return nil
	default:
		return protocol.Errorf(protocol.CodeStoreUnavailable,
			fmt.Sprintf("the actors of stream %q from its previous run here have not stopped yet; retry", prefix))
	}
}

func (c *Coordinator) dropStream(ctx context.Context, prefix string) error {
	if done, ok := c.running[prefix]; ok {
		delete(c.running, prefix)
		c.stopping[prefix] = done
	}
	pid := c.env.dir.removeStream(prefix)
	c.env.failed.forgetStream(prefix)
	c.routedMu.Lock()
	for key := range c.routed {
		if strings.HasPrefix(key, prefix+"\x00") {
			delete(c.routed, key)
		}
	}
	c.routedMu.Unlock()
	if pid == nil {
		return nil
	}
	if err := waitFuture(ctx, c.env.system, c.env.system.Root.PoisonFuture(pid)); err != nil {
		return fmt.Errorf("drop stream %s: %w", prefix, err)
	}
	_ = c.stillStopping(prefix) // forgets it: the actor handled Stopped before it terminated
	return nil
}

// Streams lists the stream prefixes whose actors run here, sorted.
func (c *Coordinator) Streams() []string { return c.env.dir.prefixes() }

// BeginShutdown makes every later mutation fail with
// COORDINATOR_TERMINATING and every heartbeat answer RETRY, while requests
// already inside finish. Held heartbeats are answered RETRY at once, so
// that they do not hold up a graceful HTTP shutdown.
func (c *Coordinator) BeginShutdown() {
	if c.env.terminating.Swap(true) {
		return
	}
	for _, ref := range c.env.dir.allGroups() {
		c.env.system.Root.Send(ref.pid, &releaseHeldMsg{})
	}
}

// HeldHeartbeats is how many heartbeats every group holds right now
// (waitMs), counted against Config.MaxHeldHeartbeats.
func (c *Coordinator) HeldHeartbeats() int64 { return c.env.held.n.Load() }

// MaxHeldHeartbeats is Config.MaxHeldHeartbeats as applied: the most
// heartbeats held at once.
func (c *Coordinator) MaxHeldHeartbeats() int { return c.env.cfg.MaxHeldHeartbeats }

// Terminating reports whether shutdown has begun.
func (c *Coordinator) Terminating() bool { return c.env.terminating.Load() }

// Close stops every actor, letting each finish the message it is handling,
// then the actor system. It does not close the store, which the caller
// opened. It waits at most until ctx is done.
func (c *Coordinator) Close(ctx context.Context) error {
	c.BeginShutdown()
	var err error
	c.closeOnce.Do(func() { err = c.shutdownActors(ctx) })
	return err
}

func (c *Coordinator) shutdownActors(ctx context.Context) error {
	// 1. Stop stream actors (each stops its groups, cancelling their
	//    timers), all at once, waiting for each within ctx.
	pids := c.env.dir.streamPIDs()
	futures := make([]*actor.Future, len(pids))
	for i, pid := range pids {
		futures[i] = c.env.system.Root.PoisonFuture(pid)
	}
	var errs []error
	for _, f := range futures {
		if err := waitFuture(ctx, c.env.system, f); err != nil {
			errs = append(errs, err)
		}
	}
	// 2. Stop the work still running beside them (a Redis call of a
	//    migration step, say) and wait for it within ctx.
	c.env.stopClosing()
	select {
	case <-c.env.work.close():
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("work beside the actors: %w", ctx.Err()))
	}
	// 3. Then the actor system itself.
	c.env.system.Shutdown()
	if len(errs) > 0 {
		return fmt.Errorf("stop actors: %w", errors.Join(errs...))
	}
	return nil
}

// waitFuture waits for f, or for ctx to end. It leaves nothing behind: a
// goroutine blocked in f.Wait would outlive a cancelled ctx until the
// future's own timeout, so f pipes its outcome to a process of its own
// instead, which unregisters itself when the outcome comes.
func waitFuture(ctx context.Context, system *actor.ActorSystem, f *actor.Future) error {
	w := &futureWaiter{system: system, done: make(chan struct{})}
	pid, ok := system.ProcessRegistry.Add(w, "wait-"+system.ProcessRegistry.NextId())
	if !ok {
		return fmt.Errorf("wait for %s: the process id is taken", pid)
	}
	f.PipeTo(pid)
	select {
	case <-w.done:
		return f.Wait() // done already: returns at once
	case <-ctx.Done():
		return ctx.Err()
	}
}

// futureWaiter is the process a future pipes its outcome to for
// waitFuture.
type futureWaiter struct {
	system *actor.ActorSystem
	once   sync.Once
	done   chan struct{}
}

// SendUserMessage is the future's outcome (an answer, or its error).
func (w *futureWaiter) SendUserMessage(pid *actor.PID, _ any) {
	w.once.Do(func() {
		w.system.ProcessRegistry.Remove(pid)
		close(w.done)
	})
}

// SendSystemMessage is never sent to a future's pipe.
func (w *futureWaiter) SendSystemMessage(*actor.PID, any) {}

// Stop is never called: the waiter unregisters itself.
func (w *futureWaiter) Stop(*actor.PID) {}

// ask sends msg to pid and waits for the answer, no longer than ctx allows
// and AskTimeout.
func (c *Coordinator) ask(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	return c.askFor(ctx, pid, msg, c.env.cfg.AskTimeout)
}

// askFor is ask with its own timeout instead of AskTimeout.
func (c *Coordinator) askFor(ctx context.Context, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < timeout {
			timeout = left
		}
	}
	if err := ctx.Err(); err != nil || timeout <= 0 {
		return nil, fmt.Errorf("ask %T: %w", msg, errors.Join(err, context.DeadlineExceeded))
	}
	res, err := c.env.system.Root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("ask %T: %w", msg, err)
	}
	return res, nil
}

// askReply is ask for messages answered with a reply[T].
func askReply[T any](ctx context.Context, c *Coordinator, pid *actor.PID, msg any) (T, error) {
	var zero T
	res, err := c.ask(ctx, pid, msg)
	if err != nil {
		return zero, err
	}
	r, ok := res.(reply[T])
	if !ok {
		return zero, fmt.Errorf("ask %T: unexpected answer %T, want %T", msg, res, r)
	}
	return r.value, r.err
}

func (c *Coordinator) mutating() error {
	if c.Terminating() {
		return protocol.Errorf(protocol.CodeCoordinatorTerminating, "the coordinator is shutting down; retry against its successor")
	}
	return nil
}

func invalid(err error) error { return protocol.Errorf(protocol.CodeInvalidRequest, err.Error()) }

func validateNames(prefix, group string) error {
	if err := protocol.ValidateStreamPrefix(prefix); err != nil {
		return invalid(err)
	}
	if group != "" || prefix == "" {
		if err := protocol.ValidateConsumerGroup(group); err != nil {
			return invalid(err)
		}
	}
	return nil
}

func streamNotFound(prefix string) error {
	return protocol.Errorf(protocol.CodeStreamNotFound, fmt.Sprintf("stream %q does not exist", prefix))
}

// streamMoving is the error of a stream this coordinator dropped (cluster
// mode): it is moving to another replica, so the caller retries.
func streamMoving(prefix string) error {
	return protocol.Errorf(protocol.CodeStoreUnavailable,
		fmt.Sprintf("stream %q is moving to another coordinator replica; retry", prefix))
}

func groupNotFound(prefix, group string) error {
	return protocol.Errorf(protocol.CodeGroupNotFound, fmt.Sprintf("group %q of stream %q does not exist", group, prefix))
}

// lookup finds a group actor, registering the group first when register is
// set and its stream exists.
func (c *Coordinator) lookup(ctx context.Context, prefix, group string, register bool) (*actor.PID, error) {
	if err := validateNames(prefix, group); err != nil {
		return nil, err
	}
	stream, pid, failed := c.env.dir.group(prefix, group)
	switch {
	case stream == nil && c.env.dir.moved(prefix):
		return nil, streamMoving(prefix)
	case failed != nil:
		return nil, protocol.Errorf(protocol.CodeStoreUnavailable,
			fmt.Sprintf("stream %q failed closed: its record cannot be read: %v", prefix, failed))
	case pid != nil:
		return pid, nil
	case stream == nil:
		return nil, streamNotFound(prefix)
	case !register:
		return nil, groupNotFound(prefix, group)
	}
	if err := c.mutating(); err != nil {
		return nil, err
	}
	v, err := askReply[ensured](ctx, c, stream, &ensureGroupMsg{name: group})
	if err != nil {
		return nil, err
	}
	return v.pid, nil
}

func shardCountOf(req protocol.CreateRequest, def int) (int, error) {
	n := def
	if req.InitialShardCount != nil {
		n = *req.InitialShardCount
	}
	if n < 1 || n > protocol.MaxShardCount {
		return 0, protocol.Errorf(protocol.CodeInvalidRequest,
			fmt.Sprintf("initialShardCount %d is outside 1..%d", n, protocol.MaxShardCount))
	}
	return n, nil
}

func requireRequestedBy(who string) error {
	if who == "" {
		return protocol.Errorf(protocol.CodeInvalidRequest, "requestedBy must name who asks for this change")
	}
	return nil
}

// createStream creates the stream record and its actor. It reports
// created=false when the stream already existed.
func (c *Coordinator) createStream(ctx context.Context, prefix string, shards int) (rec persistence.StreamRecord, created bool, err error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if c.env.dir.stream(prefix) != nil {
		return rec, false, nil
	}
	if err := c.stillStopping(prefix); err != nil {
		return rec, false, err
	}
	rec = persistence.StreamRecord{StreamPrefix: prefix, ShardCount: shards, MetadataVersion: 1, CreatedAt: c.env.now()}
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
	shards, err := shardCountOf(req, c.env.cfg.DefaultShards)
	if err != nil {
		return protocol.StreamResponse{}, err
	}
	rec, created, err := c.createStream(ctx, prefix, shards)
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
	if _, err := askReply[ensured](ctx, c, c.env.dir.stream(prefix), &ensureGroupMsg{name: prefix, mustCreate: !created}); err != nil {
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
	shards, err := shardCountOf(req, c.env.cfg.DefaultShards)
	if err != nil {
		return protocol.GroupResponse{}, err
	}
	if _, _, err := c.createStream(ctx, prefix, shards); err != nil {
		return protocol.GroupResponse{}, err
	}
	v, err := askReply[ensured](ctx, c, c.env.dir.stream(prefix), &ensureGroupMsg{name: group, mustCreate: true})
	if err != nil {
		return protocol.GroupResponse{}, err
	}
	return v.summary, nil
}

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
	pid, err := c.lookup(ctx, prefix, group, c.env.cfg.AutoCreateGroups && mayRegister)
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
		return fmt.Errorf("producer routing of %s/%s: provision: %w", routing.StreamPrefix, routing.ConsumerGroup, errors.Join(
			protocol.Errorf(protocol.CodeRedisStreamProvisioningFailed, "creating the shard streams in Redis failed; retry later"), err))
	}
	c.routedMu.Lock()
	c.routed[key] = routing.MetadataVersion
	c.routedMu.Unlock()
	return nil
}

func groupAsk[T any](ctx context.Context, c *Coordinator, prefix, group string, msg any) (T, error) {
	var zero T
	pid, err := c.lookup(ctx, prefix, group, false)
	if err != nil {
		return zero, err
	}
	return askReply[T](ctx, c, pid, msg)
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
	return summary, nil
}

func (c *Coordinator) streamPID(prefix string) (*actor.PID, error) {
	if err := validateNames(prefix, ""); err != nil {
		return nil, err
	}
	pid := c.env.dir.stream(prefix)
	if pid == nil {
		if c.env.dir.moved(prefix) {
			return nil, streamMoving(prefix)
		}
		return nil, streamNotFound(prefix)
	}
	return pid, nil
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
	if n := *req.TargetShardCount; n < 0 || n > protocol.MaxShardCount {
		return protocol.ScaleResponse{}, protocol.Errorf(protocol.CodeInvalidRequest,
			fmt.Sprintf("targetShardCount %d is outside 0..%d", n, protocol.MaxShardCount))
	}
	return askReply[protocol.ScaleResponse](ctx, c, pid, &scaleMsg{req: req})
}

// Migrations lists the stream's migrations as seen by one group.
func (c *Coordinator) Migrations(ctx context.Context, prefix, group string) (protocol.MigrationsResponse, error) {
	if _, err := c.lookup(ctx, prefix, group, false); err != nil {
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
	if _, err := c.lookup(ctx, prefix, group, false); err != nil {
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

// Groups describes every group that can answer; groups that failed closed
// are left out here and reported by Health. Once ctx is done it answers
// with the groups that answered by then, and ctx's error.
func (c *Coordinator) Groups(ctx context.Context) (protocol.GroupsResponse, error) {
	out := protocol.GroupsResponse{Groups: []protocol.GroupResponse{}}
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
	return out, nil
}

// Health reports the coordinator's state: DEGRADED while any group failed
// closed or configured Redis does not answer, DOWN once shutdown has begun.
func (c *Coordinator) Health(ctx context.Context) protocol.Health {
	h := protocol.Health{
		Status:        protocol.HealthUp,
		CoordinatorID: c.env.cfg.CoordinatorID,
		Redis:         protocol.ComponentHealth{Status: protocol.HealthNotConfigured, Message: "no --redis given: no provisioning and no drain proofs"},
		Loop:          protocol.ComponentHealth{Status: protocol.HealthUp},
		Store:         protocol.ComponentHealth{Status: protocol.HealthUp},
	}
	if r := c.env.cfg.Redis; r != nil {
		pctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
		err := r.Ping(pctx)
		cancel()
		if err != nil {
			h.Status = protocol.HealthDegraded
			h.Redis = protocol.ComponentHealth{Status: protocol.HealthDown, Message: err.Error()}
		} else {
			h.Redis = protocol.ComponentHealth{Status: protocol.HealthUp}
		}
	}
	if failed := c.env.failed.list(); len(failed) > 0 {
		h.Status = protocol.HealthDegraded
		h.Store = protocol.ComponentHealth{Status: protocol.HealthDegraded,
			Message: fmt.Sprintf("%d groups failed closed: %v", len(failed), failed)}
	}
	// Err also lets a failed store try to recover.
	if err := c.env.store.Err(ctx); err != nil {
		h.Status = protocol.HealthDegraded
		h.Store = protocol.ComponentHealth{Status: protocol.HealthDown, Message: err.Error()}
	}
	if c.Terminating() {
		h.Status = protocol.HealthDown
		h.Loop = protocol.ComponentHealth{Status: protocol.HealthDown, Message: "shutting down"}
	}
	return h
}

// registerWait bounds how long a join waits for its group to be registered
// before it is answered RETRY.
const registerWait = time.Second

// redisPingTimeout bounds the Redis check of a health request.
const redisPingTimeout = time.Second

// Heartbeat runs one member heartbeat (docs/protocol.md §6.1). It always answers
// a response: failures of the coordinator itself are RETRY, so that a
// member keeps its shards and tries again.
func (c *Coordinator) Heartbeat(ctx context.Context, prefix, group, memberID string, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse {
	cfg := c.env.cfg.Group
	if resp, ok := assign.Validate(req, memberID, cfg); !ok {
		return resp
	}
	if err := validateNames(prefix, group); err != nil {
		return assign.InvalidRequestResponse(req, cfg, err.Error())
	}
	if c.Terminating() {
		return assign.RetryResponse(req, cfg)
	}
	register := c.env.cfg.AutoCreateGroups && req.MemberEpoch == protocol.EpochJoin
	lctx := ctx
	if register {
		// Registering a group provisions its shard streams in Redis; a
		// member is not kept waiting on a slow Redis for that: RETRY, and
		// the registration goes on for its next join.
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, registerWait)
		defer cancel()
	}
	pid, err := c.lookup(lctx, prefix, group, register)
	if err != nil {
		var perr *protocol.Error
		if errors.As(err, &perr) && (perr.Code == protocol.CodeStreamNotFound || perr.Code == protocol.CodeGroupNotFound) {
			// Said apart from an unknown member, so that a client can tell
			// a join that can never succeed from one that can.
			resp := assign.UnknownMemberResponse(req, cfg)
			resp.ErrorCode, resp.Message = perr.Code, perr.Message
			return resp
		}
		c.env.log.Warn("heartbeat answered RETRY", slog.String("stream", prefix), slog.String("group", group), slog.Any("error", err))
		return assign.RetryResponse(req, cfg)
	}
	resp, err := c.askHeartbeat(ctx, pid, req)
	if err != nil {
		if ctx.Err() == nil {
			c.env.log.Warn("heartbeat answered RETRY", slog.String("stream", prefix), slog.String("group", group), slog.Any("error", err))
		}
		return assign.RetryResponse(req, cfg)
	}
	return resp
}

// askHeartbeat hands req to the group actor pid and waits for its answer,
// at most the heartbeat's budget, and no longer than ctx (the client gone).
func (c *Coordinator) askHeartbeat(ctx context.Context, pid *actor.PID, req *protocol.HeartbeatRequest) (protocol.HeartbeatResponse, error) {
	proc, live := c.env.system.ProcessRegistry.Get(pid)
	if !live {
		// The group actor stopped since the lookup (the group was deleted
		// or moved to another replica). A future would have had the dead
		// letter's answer at once; a channel has none to wait for.
		return protocol.HeartbeatResponse{}, errors.New("the group actor stopped")
	}
	to := make(answerTo, 1)
	proc.SendUserMessage(pid, &heartbeatMsg{req: req, to: to, gone: ctx.Done()})
	timeout := time.NewTimer(c.HeartbeatBudget(req))
	defer timeout.Stop()
	select {
	case resp := <-to:
		return resp, nil
	case <-ctx.Done():
		return protocol.HeartbeatResponse{}, ctx.Err()
	case <-timeout.C:
		return protocol.HeartbeatResponse{}, errors.New("the group actor did not answer within the heartbeat budget")
	}
}

// HeartbeatBudget is how long answering req may take: the ask timeout, plus
// the time a held heartbeat (waitMs) may be held. The HTTP layer keeps its
// write deadline past it, so that a held answer is not cut.
func (c *Coordinator) HeartbeatBudget(req *protocol.HeartbeatRequest) time.Duration {
	return c.env.cfg.AskTimeout + MaxHold(req, c.env.cfg.Group)
}

// MaxHold is the longest a group may hold the answer to req: its waitMs,
// at most the heartbeat interval (docs/protocol.md §9.5).
func MaxHold(req *protocol.HeartbeatRequest, cfg assign.Config) time.Duration {
	if req.WaitMs <= 0 {
		return 0
	}
	return time.Duration(min(req.WaitMs, cfg.HeartbeatInterval.Milliseconds())) * time.Millisecond
}

// GroupConfig is the timing every group runs with.
func (c *Coordinator) GroupConfig() assign.Config { return c.env.cfg.Group }
