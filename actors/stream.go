package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/clienttext"
	"github.com/rscoord/rscoord/persistence"
)

// streamActor owns one stream prefix: its record (shard layout, migrations)
// and the group actors under it, which it supervises. It serializes the
// stream's admin changes; heartbeats never pass through it.
type streamActor struct {
	env    *env
	prefix string
	// init is used by the first incarnation only; a restarted stream actor
	// reloads its record and groups from the store.
	init *streamInit
	// stopped is closed once this stream's actor (every incarnation of
	// it, and so every group actor under it) has stopped for good.
	stopped chan struct{}

	rec    persistence.StreamRecord
	groups map[string]*actor.PID
	failed error

	self  *actor.PID
	timer *time.Timer
	// waiting says, for monitoring, why the active migration has not
	// advanced at its last check. Not durable: the next check rebuilds it.
	waiting string
	// resume is set at start-up when a PREPARING migration was found: the
	// first check retries its provisioning once.
	resume bool
	// stepping is set while a migration step (an operator command or a
	// check) runs; its Redis work and asks go on beside the actor, and
	// later steps wait in queue.
	stepping bool
	queue    []migrationStep
	// routed is since when every group is known to answer producers
	// routing by a shard count (reshard.Facts.RoutedSince). Not durable: a
	// restarted actor learns it again from its groups, later, which only
	// delays a migration.
	routed routedSince
	// gone is set once this incarnation stops or restarts: continuations
	// of its work beside the actor are dropped (a restarted actor resumes
	// from its record).
	gone bool
	// registering holds the asks to register a group, by name, while its
	// shard streams are provisioned in Redis beside the actor.
	registering map[string][]registration
	// auto is the autoscaling state (autoscale.go).
	auto autoscaler
	// deleted is set once the stream record was deleted: every ask is
	// then answered STREAM_NOT_FOUND until the actor stops.
	deleted bool
}

// registration is an ask to register a group waiting for its provisioning.
type registration struct {
	to         *actor.PID
	mustCreate bool
	fly        *onTheFly
	floor      int64
}

// groupSupervision restarts a failing group actor, alone, from its
// snapshot; a group that keeps panicking (more than groupMaxRestarts times
// in groupRestartWindow) is stopped rather than spinning, and the stream
// actor puts a cooling one in its place (groupStopped).
var groupSupervision = actor.NewOneForOneStrategy(groupMaxRestarts, groupRestartWindow, actor.DefaultDecider)

const (
	groupMaxRestarts   = 10
	groupRestartWindow = time.Minute
)

func newStreamActor(e *env, prefix string, init *streamInit, stopped chan struct{}) actor.Producer {
	return func() actor.Actor {
		a := &streamActor{env: e, prefix: prefix, init: init, stopped: stopped}
		init = nil
		return a
	}
}

func (s *streamActor) log() *slog.Logger { return s.env.log.With(slog.String("stream", s.prefix)) }

// Receive handles one message; protoactor never calls it concurrently.
func (s *streamActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.self = ctx.Self()
		s.start(ctx)
	case *actor.Stopping, *actor.Restarting:
		s.gone = true
		s.stopTimer()
		s.auto.stop()
		s.abandon(ctx)
		if _, stopping := m.(*actor.Stopping); stopping {
			s.env.obs.StreamRemoved(s.prefix)
		}
	case *actor.Stopped:
		// Delivered once, after every child stopped; a restart is
		// Restarting instead.
		if s.stopped != nil {
			close(s.stopped)
		}
	case *actor.Terminated:
		s.groupStopped(ctx, m.Who)
	case *drainCheckMsg:
		s.timer = nil
		s.migrate(ctx, migrationStep{msg: m})
	case *shardsMsg:
		if err := s.unavailable(); err != nil {
			ctx.Respond(reply[streamLayout]{err: err})
			return
		}
		layout := streamLayout{shardCount: s.rec.ShardCount, draining: slices.Clone(s.rec.DrainingShards),
			metadataVersion: s.rec.MetadataVersion, spanned: s.spanned()}
		if mig := s.activeMigration(); mig != nil {
			w := s.wire(*mig)
			layout.active = &w
		}
		ctx.Respond(reply[streamLayout]{value: layout})
	case *readyMsg:
		ctx.Respond(reply[struct{}]{err: s.failed})
	case *ensureGroupMsg:
		s.ensureGroup(ctx, m)
	case *groupDeletedMsg:
		if pid := s.groups[m.name]; pid != nil {
			ctx.Poison(pid)
			delete(s.groups, m.name)
			s.env.dir.removeGroup(s.prefix, m.name)
		}
		ctx.Respond(reply[struct{}]{})
	case *deletePlanMsg:
		ctx.Respond(s.deletePlan())
	case *deleteStreamMsg:
		ctx.Respond(reply[struct{}]{err: s.deleteRecord()})
	case *scaleMsg, *rollbackMsg, *completeMsg:
		s.migrate(ctx, migrationStep{msg: m, sender: ctx.Sender()})
	case *migrationsMsg:
		if err := s.unavailable(); err != nil {
			ctx.Respond(reply[protocol.MigrationsResponse]{err: err})
			return
		}
		ctx.Respond(reply[protocol.MigrationsResponse]{value: s.migrations()})
	default:
		s.receiveAutoscale(ctx)
	}
}

func (s *streamActor) start(ctx actor.Context) {
	s.groups = map[string]*actor.PID{}
	init := s.init
	s.init = nil
	if init == nil {
		loaded, err := s.load()
		if err != nil {
			s.failed = err
			s.log().Error("stream failed to load", slog.Any("error", err))
			return
		}
		init = loaded
	}
	s.rec = init.record
	if s.rec.Err != nil {
		// Without its layout no group of the stream can be trusted.
		s.failed = s.rec.Err
		s.log().Error("stream failed closed", slog.Any("error", s.rec.Err))
		return
	}
	for i := range init.groups {
		rec := init.groups[i]
		s.spawnGroup(ctx, rec.Name, &rec)
	}
	s.reportMigrations()
	if mig := s.activeMigration(); mig != nil && s.env.cfg.Redis != nil {
		// A restart resumes the migration where its record says it was.
		s.resume = mig.State == protocol.MigrationPreparing
		s.scheduleCheck(0)
	}
	s.startAutoscale()
}

// abandon answers every ask waiting for work beside this incarnation
// (queued migration steps, group registrations), which will never finish.
func (s *streamActor) abandon(ctx actor.Context) {
	err := protocol.Errorf(protocol.CodeCoordinatorTerminating,
		fmt.Sprintf("the actor of stream %q is stopping; retry", s.prefix))
	s.failMigrationSteps(ctx, err)
	for name, waiting := range s.registering {
		for _, w := range waiting {
			if w.to != nil {
				ctx.Send(w.to, reply[ensured]{err: err})
			}
		}
		delete(s.registering, name)
	}
}

// reportMigrations tells the observer the stream's migrations by state.
func (s *streamActor) reportMigrations() {
	byState := map[protocol.MigrationState]int{}
	for _, m := range s.rec.Migrations {
		byState[m.State]++
	}
	s.env.obs.StreamMigrations(s.prefix, byState)
}

func (s *streamActor) load() (*streamInit, error) {
	sctx, cancel := s.env.storeContext()
	defer cancel()
	streams, err := s.env.store.LoadStreams(sctx)
	if err != nil {
		return nil, fmt.Errorf("load streams: %w", err)
	}
	for _, rec := range streams {
		if rec.StreamPrefix == s.prefix {
			groups, err := s.env.store.LoadGroups(sctx, s.prefix)
			if err != nil {
				return nil, fmt.Errorf("load groups of %s: %w", s.prefix, err)
			}
			return &streamInit{record: rec, groups: groups}, nil
		}
	}
	return nil, fmt.Errorf("load stream %s: %w", s.prefix, persistence.ErrNotFound)
}

func (s *streamActor) spawnGroup(ctx actor.Context, name string, rec *persistence.GroupRecord) *actor.PID {
	return s.spawnGroupActor(ctx, name, newGroupActor(s.env, s.prefix, name, rec))
}

// groupStopped puts a new actor in the place of a group actor that stopped
// while the stream still has the group: its supervisor gave up on it after
// repeated panics. Left dead, the group would answer RETRY to every member
// and refuse every admin call until the process restarted; the new actor
// fails closed (health DEGRADED, RETRY to heartbeats) for a restart window,
// so that a group panicking on every message cannot spin, and then reloads
// the group from the store. Groups deleted or stopped with the stream are
// no longer in s.groups and are left alone.
func (s *streamActor) groupStopped(ctx actor.Context, who *actor.PID) {
	if s.gone {
		return
	}
	for name, pid := range s.groups {
		if pid.Equal(who) {
			s.log().Error("group actor stopped after repeated panics; it fails closed, then reloads from the store",
				slog.String("group", name), slog.Duration("after", s.env.groupCoolDown))
			s.spawnGroupActor(ctx, name, newCoolingGroupActor(s.env, s.prefix, name, s.env.groupCoolDown))
			return
		}
	}
}

// spawnGroupActor starts the group actor producer makes as the group name
// of this stream.
func (s *streamActor) spawnGroupActor(ctx actor.Context, name string, producer actor.Producer) *actor.PID {
	// A priority mailbox: answers not held pass held work (held.go).
	props := actor.PropsFromProducer(producer, actor.WithMailbox(actor.UnboundedPriority()), actor.WithDispatcher(s.env.mailboxes))
	pid := ctx.SpawnPrefix(props, "group-"+name+"-")
	s.groups[name] = pid
	s.env.dir.putGroup(s.prefix, name, pid)
	return pid
}

// spanned is one past the highest shard index of any layout the stream
// had: its count, its draining shards and both counts of every migration.
func (s *streamActor) spanned() int {
	n := s.rec.ShardCount
	for _, d := range s.rec.DrainingShards {
		n = max(n, d+1)
	}
	for _, m := range s.rec.Migrations {
		n = max(n, m.FromShardCount, m.ToShardCount)
	}
	return n
}

// unavailable is the error of a stream that failed closed, or nil.
func (s *streamActor) unavailable() error {
	if s.deleted {
		return protocol.Errorf(protocol.CodeStreamNotFound, fmt.Sprintf("stream %q was deleted", s.prefix))
	}
	if s.failed == nil {
		return nil
	}
	return protocol.Errorf(protocol.CodeStoreUnavailable,
		fmt.Sprintf("stream %q failed closed: %v", s.prefix, s.failed))
}

// ensured answers ensureGroupMsg.
type ensured struct {
	pid     *actor.PID
	created bool
	summary protocol.GroupResponse
}

// ensureGroup registers a group unless it exists. With Redis, its shard
// streams are provisioned first, beside the actor: asks for the same group
// meanwhile wait for that one provisioning, and the stream actor keeps
// serving everything else.
func (s *streamActor) ensureGroup(ctx actor.Context, m *ensureGroupMsg) {
	if err := s.unavailable(); err != nil {
		ctx.Respond(reply[ensured]{err: err})
		return
	}
	_, inFlight := s.registering[m.name]
	if s.groups[m.name] == nil && !inFlight {
		if err := s.admitRegistration(m.name, m.fly); err != nil {
			ctx.Respond(reply[ensured]{err: err})
			return
		}
	}
	if s.groups[m.name] != nil || s.env.cfg.Redis == nil {
		ctx.Respond(s.registerNow(ctx, m.name, m.mustCreate, m.fly, m.floor))
		return
	}
	if s.registering == nil {
		s.registering = map[string][]registration{}
	}
	s.registering[m.name] = append(s.registering[m.name], registration{to: ctx.Sender(), mustCreate: m.mustCreate, fly: m.fly, floor: m.floor})
	if !inFlight {
		s.provisionGroup(ctx, m.name)
	}
}

// provisionGroup provisions every readable shard for group name beside the
// actor, then registers it and answers everyone waiting.
func (s *streamActor) provisionGroup(ctx actor.Context, name string) {
	keys := s.readableKeys()
	s.provisionBeside(ctx, keys, []string{name}, func(err error) {
		if err == nil && !slices.Equal(keys, s.readableKeys()) {
			// A scale changed the layout meanwhile; the new shards were
			// provisioned for the groups that existed then only.
			s.provisionGroup(ctx, name)
			return
		}
		waiting := s.registering[name]
		delete(s.registering, name)
		for _, w := range waiting {
			r := reply[ensured]{err: err}
			if err == nil {
				r = s.registerNow(ctx, name, w.mustCreate, w.fly, w.floor)
			}
			if w.to != nil {
				ctx.Send(w.to, r)
			}
		}
	})
}

// registerNow answers an existing group, else creates it (its shard
// streams are provisioned already).
//
// A registration on the fly (fly set) is audited before it is saved. A
// group created with a version floor starts above it (startAbove).
func (s *streamActor) registerNow(ctx actor.Context, name string, mustCreate bool, fly *onTheFly, floor int64) reply[ensured] {
	if pid := s.groups[name]; pid != nil {
		if mustCreate {
			return reply[ensured]{err: protocol.Errorf(protocol.CodeGroupAlreadyExists,
				fmt.Sprintf("group %q of stream %q already exists", name, s.prefix))}
		}
		return reply[ensured]{value: ensured{pid: pid}}
	}
	now := s.env.now()
	sctx, cancel := s.env.storeContext()
	defer cancel()
	// A group registered again continues above what its deleted
	// predecessor answered (docs/protocol.md, monotonic versions).
	tomb, err := s.env.store.LoadTombstone(sctx, s.prefix, name)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return reply[ensured]{err: storeError("create group", err)}
	}
	g := assign.NewGroupAfter(tomb, s.prefix, name, s.rec.ShardCount, now)
	startAbove(g, floor)
	if len(s.rec.DrainingShards) > 0 {
		assign.SetLayout(g, s.rec.ShardCount, s.rec.DrainingShards, now, s.env.cfg.Group)
	}
	if mig := s.activeMigration(); mig != nil {
		g.ActiveMigration = &mig.Migration
	}
	if fly != nil {
		if err := s.auditRegistration(sctx, name, fly); err != nil {
			return reply[ensured]{err: err}
		}
	}
	start := time.Now()
	rev, err := s.env.store.SaveGroup(sctx, g, nil, 0)
	s.env.obs.StoreWrite("group", time.Since(start), err)
	if errors.Is(err, persistence.ErrStaleRevision) {
		// The store holds a group this actor does not run: one that failed
		// to load. Refuse rather than overwrite it.
		return reply[ensured]{err: protocol.Errorf(protocol.CodeGroupAlreadyExists,
			fmt.Sprintf("group %q of stream %q exists in the store but could not be loaded", name, s.prefix))}
	}
	if err != nil {
		return reply[ensured]{err: storeError("create group", err)}
	}
	summary := g.Summary()
	pid := s.spawnGroup(ctx, name, &persistence.GroupRecord{StreamPrefix: s.prefix, Name: name, Group: g, Revision: rev})
	if fly != nil {
		s.log().Info("group registered on the fly", slog.String("group", name), slog.String("principal", fly.by.Principal), slog.String("via", string(fly.via)))
	} else {
		s.log().Info("group registered", slog.String("group", name), slog.Bool("requested", mustCreate))
	}
	return reply[ensured]{value: ensured{pid: pid, created: true, summary: summary}}
}

// startAbove raises a new group's epochs and version above floor, a
// create request's versionFloor. An import from another coordinator sets
// it: that coordinator's members switch over carrying numbers up to the
// floor. Below ours, such a member is only unknown here, and rejoins. A
// version further ahead of ours than a metadata correction may move would
// be refused instead. The numbers the application sees keep rising too.
func startAbove(g *assign.Group, floor int64) {
	if floor <= 0 {
		return
	}
	g.GroupEpoch = max(g.GroupEpoch, floor+1)
	g.AssignmentEpoch = max(g.AssignmentEpoch, floor+1)
	g.MetadataVersion = max(g.MetadataVersion, floor+1)
}

// storeError turns a store failure into the 503 clients see.
func storeError(op string, err error) error {
	return fmt.Errorf("%s: %w", op, errors.Join(protocol.Errorf(protocol.CodeStoreUnavailable, "the store refused the write; retry later"), err))
}

// activeMigration is the migration not yet in a final state, or nil.
func (s *streamActor) activeMigration() *persistence.MigrationRecord {
	for i := range s.rec.Migrations {
		switch s.rec.Migrations[i].State {
		case protocol.MigrationDeprecated, protocol.MigrationRolledBack:
		default:
			return &s.rec.Migrations[i]
		}
	}
	return nil
}

// saveRecord writes next as the stream record and adopts it once durable.
func (s *streamActor) saveRecord(next persistence.StreamRecord) error {
	sctx, cancel := s.env.storeContext()
	defer cancel()
	start := time.Now()
	rev, err := s.env.store.SaveStream(sctx, next, s.rec.Revision)
	s.env.obs.StoreWrite("stream", time.Since(start), err)
	if err != nil {
		return storeError("save stream "+s.prefix, err)
	}
	next.Revision = rev
	s.rec = next
	s.reportMigrations()
	return nil
}

// scaleResponse is the answer to a scale: the migration as each group
// sees it (the same one: shard keys are shared), in the groups' order. A
// stream without groups scales all the same, so its answer still carries
// the migration, once: an empty list would say nothing was started while
// the count changed and the migration holds off the next scale.
func (s *streamActor) scaleResponse(target int, mig protocol.Migration) protocol.ScaleResponse {
	names := make([]string, 0, len(s.groups))
	for name := range s.groups {
		names = append(names, name)
	}
	sort.Strings(names)
	migs := make([]protocol.Migration, max(len(names), 1))
	for i := range migs {
		migs[i] = mig
	}
	return protocol.ScaleResponse{StreamPrefix: s.prefix, TargetShardCount: target, AffectedConsumerGroups: names, Migrations: migs}
}

func findIn(migs []persistence.MigrationRecord, id string) *persistence.MigrationRecord {
	for i := range migs {
		if migs[i].ReshardingID == id {
			return &migs[i]
		}
	}
	return nil
}

func migrationNotFound(prefix, id string) error {
	return protocol.Errorf(protocol.CodeMigrationNotFound, fmt.Sprintf("stream %q has no migration %s", prefix, clienttext.Quote(id)))
}

func (s *streamActor) migrations() protocol.MigrationsResponse {
	out := protocol.MigrationsResponse{Migrations: make([]protocol.Migration, len(s.rec.Migrations))}
	for i, m := range s.rec.Migrations {
		out.Migrations[i] = s.wire(m)
	}
	if active := s.activeMigration(); active != nil {
		id := active.ReshardingID
		out.ActiveReshardingID = &id
	}
	return out
}
