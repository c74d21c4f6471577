package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/protocol"
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
}

// groupSupervision restarts a failing group actor, alone, from its
// snapshot; a group that keeps panicking is stopped rather than spinning.
var groupSupervision = actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)

func newStreamActor(e *env, prefix string, init *streamInit) actor.Producer {
	return func() actor.Actor {
		a := &streamActor{env: e, prefix: prefix, init: init}
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
		s.stopTimer()
	case *drainCheckMsg:
		s.timer = nil
		s.drainCheck()
	case *shardsMsg:
		if err := s.unavailable(); err != nil {
			ctx.Respond(reply{err: err})
			return
		}
		ctx.Respond(reply{value: streamLayout{shardCount: s.rec.ShardCount, draining: slices.Clone(s.rec.DrainingShards)}})
	case *readyMsg:
		ctx.Respond(reply{err: s.failed})
	case *ensureGroupMsg:
		ctx.Respond(s.ensureGroup(ctx, m))
	case *groupDeletedMsg:
		if pid := s.groups[m.name]; pid != nil {
			ctx.Poison(pid)
			delete(s.groups, m.name)
			s.env.dir.removeGroup(s.prefix, m.name)
		}
		ctx.Respond(reply{})
	case *scaleMsg:
		ctx.Respond(s.scale(m.req))
	case *rollbackMsg:
		ctx.Respond(s.rollback(m.id, m.req))
	case *completeMsg:
		ctx.Respond(s.complete(m.id, m.req))
	case *migrationsMsg:
		if err := s.unavailable(); err != nil {
			ctx.Respond(reply{err: err})
			return
		}
		ctx.Respond(reply{value: s.migrations()})
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
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
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
	props := actor.PropsFromProducer(newGroupActor(s.env, s.prefix, name, rec))
	pid := ctx.SpawnPrefix(props, "group-"+name+"-")
	s.groups[name] = pid
	s.env.dir.putGroup(s.prefix, name, pid)
	return pid
}

// unavailable is the error of a stream that failed closed, or nil.
func (s *streamActor) unavailable() error {
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

func (s *streamActor) ensureGroup(ctx actor.Context, m *ensureGroupMsg) reply {
	if err := s.unavailable(); err != nil {
		return reply{err: err}
	}
	if pid := s.groups[m.name]; pid != nil {
		if m.mustCreate {
			return reply{err: protocol.Errorf(protocol.CodeGroupAlreadyExists,
				fmt.Sprintf("group %q of stream %q already exists", m.name, s.prefix))}
		}
		return reply{value: ensured{pid: pid}}
	}
	if err := s.provision(s.readableKeys(), []string{m.name}); err != nil {
		return reply{err: err}
	}
	now := s.env.now()
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	// A group registered again continues above what its deleted
	// predecessor answered (docs/protocol.md, monotonic versions).
	tomb, err := s.env.store.LoadTombstone(sctx, s.prefix, m.name)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return reply{err: storeError("create group", err)}
	}
	g := assign.NewGroupAfter(tomb, s.prefix, m.name, s.rec.ShardCount, now)
	if len(s.rec.DrainingShards) > 0 {
		assign.SetLayout(g, s.rec.ShardCount, s.rec.DrainingShards, now, s.env.cfg.Group)
	}
	if mig := s.activeMigration(); mig != nil {
		g.ActiveMigration = &mig.Migration
	}
	start := time.Now()
	rev, err := s.env.store.SaveGroup(sctx, g, nil, 0)
	s.env.obs.StoreWrite("group", time.Since(start), err)
	if errors.Is(err, persistence.ErrStaleRevision) {
		// The store holds a group this actor does not run: one that failed
		// to load. Refuse rather than overwrite it.
		return reply{err: protocol.Errorf(protocol.CodeGroupAlreadyExists,
			fmt.Sprintf("group %q of stream %q exists in the store but could not be loaded", m.name, s.prefix))}
	}
	if err != nil {
		return reply{err: storeError("create group", err)}
	}
	summary := g.Summary()
	pid := s.spawnGroup(ctx, m.name, &persistence.GroupRecord{StreamPrefix: s.prefix, Name: m.name, Group: g, Revision: rev})
	s.log().Info("group registered", slog.String("group", m.name), slog.Bool("requested", m.mustCreate))
	return reply{value: ensured{pid: pid, created: true, summary: summary}}
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
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
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

// cloneRecord copies the record deeply enough that changing the copy's
// migrations or draining shards leaves the durable one untouched.
func cloneRecord(r persistence.StreamRecord) persistence.StreamRecord {
	r.DrainingShards = slices.Clone(r.DrainingShards)
	r.Migrations = slices.Clone(r.Migrations)
	return r
}

func (s *streamActor) scaleResponse(target int, mig protocol.Migration) protocol.ScaleResponse {
	names := make([]string, 0, len(s.groups))
	for name := range s.groups {
		names = append(names, name)
	}
	sort.Strings(names)
	migs := make([]protocol.Migration, len(names))
	for i := range migs {
		migs[i] = mig
	}
	return protocol.ScaleResponse{StreamPrefix: s.prefix, TargetShardCount: target, AffectedConsumerGroups: names, Migrations: migs}
}

// applyLayout tells every group the stream's current layout. Every group is
// tried; the first failure is returned.
func (s *streamActor) applyLayout(active *protocol.Migration) error {
	var first error
	for name, pid := range s.groups {
		msg := &setLayoutMsg{shardCount: s.rec.ShardCount, draining: slices.Clone(s.rec.DrainingShards), migration: active}
		res, err := s.env.system.Root.RequestFuture(pid, msg, s.env.cfg.AskTimeout).Result()
		if err == nil {
			err = res.(reply).err
		}
		if err != nil {
			s.log().Error("group did not take the new layout", slog.String("group", name), slog.Any("error", err))
			if first == nil {
				first = err
			}
		}
	}
	return first
}

func (s *streamActor) rollback(id string, req protocol.OperatorRequest) reply {
	return s.endMigration(id, req, protocol.MigrationRolledBack, []protocol.MigrationState{protocol.MigrationActive},
		func(next *persistence.StreamRecord, m *persistence.MigrationRecord) {
			// A rolled-back scale-in makes its removed shards live again;
			// the shards a rolled-back scale-out added simply leave the
			// layout, with any records already written to them left for the
			// operator (docs/protocol.md §7).
			next.DrainingShards = slices.DeleteFunc(next.DrainingShards, func(s int) bool { return s < m.FromShardCount })
			next.ShardCount = m.FromShardCount
		})
}

// complete lets an operator retire the removed shards of a migration whose
// drain cannot be proven, ending it as DEPRECATED.
func (s *streamActor) complete(id string, req protocol.OperatorRequest) reply {
	return s.endMigration(id, req, protocol.MigrationDeprecated,
		[]protocol.MigrationState{protocol.MigrationActive, protocol.MigrationDraining},
		func(next *persistence.StreamRecord, m *persistence.MigrationRecord) {
			m.RetiredShards = normalizeShards(append(m.RetiredShards, next.DrainingShards...))
			next.DrainingShards = nil
		})
}

// endMigration moves migration id from one of the states in from to final,
// changing the stream record with change in the same durable write, then
// tells every group the new layout. Asking again once the migration is
// final answers the same record, so operators can retry safely.
func (s *streamActor) endMigration(id string, req protocol.OperatorRequest, final protocol.MigrationState,
	from []protocol.MigrationState, change func(next *persistence.StreamRecord, m *persistence.MigrationRecord),
) reply {
	if err := s.unavailable(); err != nil {
		return reply{err: err}
	}
	mig := findIn(s.rec.Migrations, id)
	switch {
	case mig == nil:
		return reply{err: migrationNotFound(s.prefix, id)}
	case mig.State == final:
		return reply{value: s.wire(*mig)}
	case !slices.Contains(from, mig.State):
		return reply{err: protocol.Errorf(protocol.CodeRollbackNotAllowed,
			fmt.Sprintf("migration %s is %s; only %v can become %s", id, mig.State, from, final))}
	}
	next := cloneRecord(s.rec)
	m := findIn(next.Migrations, id)
	m.State, m.UpdatedAt = final, s.env.now()
	m.Note = fmt.Sprintf("%s by %s: %s", final, req.RequestedBy, req.Reason)
	change(&next, m)
	next.MetadataVersion++
	if err := s.saveRecord(next); err != nil {
		return reply{err: err}
	}
	s.log().Info("migration ended", slog.String("migration", id), slog.String("state", string(final)),
		slog.String("by", req.RequestedBy), slog.String("reason", req.Reason))
	s.waiting = ""
	if err := s.applyLayout(nil); err != nil {
		return reply{err: err}
	}
	if final == protocol.MigrationDeprecated {
		// Forced retirement: with the retire option the removed keys go
		// too. Best effort: the operator asked to end the migration.
		if err := s.deleteRetired(*findIn(s.rec.Migrations, id)); err != nil {
			s.log().Error("removed shards not deleted", slog.String("migration", id), slog.Any("error", err))
		}
	}
	return reply{value: s.wire(*findIn(s.rec.Migrations, id))}
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
	return protocol.Errorf(protocol.CodeMigrationNotFound, fmt.Sprintf("stream %q has no migration %q", prefix, id))
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
