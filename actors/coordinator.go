package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/ratelog"
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
		mailboxes: newMailboxDispatcher(2 * runtime.GOMAXPROCS(0)),
		warn:      ratelog.New(logger, cfg.WarnInterval, cfg.Now),
		budget:    newRegistrationBudget(cfg.MaxGroupRegistrationsPerPrincipal, cfg.GroupRegistrationWindow),
	}, routed: map[string]int64{}, running: map[string]chan struct{}{}, stopping: map[string]chan struct{}{}}
	if cfg.Placed {
		logger.Info("coordinator started; streams are added as this replica claims them", slog.String("coordinatorId", cfg.CoordinatorID))
		return c, nil
	}
	streams, err := cfg.Store.LoadStreams(ctx)
	if err != nil {
		stopClosing()
		system.Shutdown()
		c.env.mailboxes.close()
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
	c.env.mailboxes.close()
	if len(errs) > 0 {
		return fmt.Errorf("stop actors: %w", errors.Join(errs...))
	}
	return nil
}
