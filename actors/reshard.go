package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/reshard"
)

// Resharding (docs/protocol.md §7) as the stream actor executes it. Package
// reshard decides; this file only gathers the facts it asks for and
// carries its decisions out, in the order reshard.Decision gives: save the
// record (synced, before anything is acted on, so that a restarted stream
// actor resumes from it), tell the groups the layout, do the Redis work,
// schedule the next check.
//
// Asks of group actors and every Redis call run beside the actor and come
// back as continuations (ReenterAfter): the stream actor keeps serving
// joins, group registrations and reads while Redis is slow. Migration
// steps themselves (operator commands and timer checks) run one at a time:
// one that arrives while another is under way waits in s.queue, so that,
// say, a scale never provisions a shard that a completed migration's
// best-effort delete is still removing.

// migrationStep is an operator command or a timer check waiting for the
// step under way, with whom to answer.
type migrationStep struct {
	msg    any
	sender *actor.PID
}

// routedSince is since when every group is known to answer producers the
// shard count count.
type routedSince struct {
	count int
	since time.Time
}

// routedFor is the routing's start for the record's shard count, zero when
// not known.
func (s *streamActor) routedFor() time.Time {
	if s.routed.count == s.rec.ShardCount {
		return s.routed.since
	}
	return time.Time{}
}

// reshardConfig is the migration rules of this coordinator.
func (s *streamActor) reshardConfig() reshard.Config {
	c := s.env.cfg
	return reshard.Config{Redis: c.Redis != nil, RoutingLease: c.ProducerRoutingLease,
		CheckInterval: c.DrainCheckInterval, RetireRemoved: c.RetireRemovedShards}
}

// stream is the record as package reshard sees it.
func (s *streamActor) stream() reshard.Stream {
	r := s.rec
	out := reshard.Stream{Prefix: s.prefix, ShardCount: r.ShardCount, Draining: normalizeShards(r.DrainingShards),
		MetadataVersion: r.MetadataVersion, Migrations: make([]reshard.Migration, len(r.Migrations))}
	for i, m := range r.Migrations {
		out.Migrations[i] = reshard.Migration{Migration: m.Migration, RequestedBy: m.RequestedBy, Reason: m.Reason,
			ActivatedAt: m.ActivatedAt, DeprecatedAfter: m.DeprecatedAfter, RetiredShards: slices.Clone(m.RetiredShards), Note: m.Note}
	}
	return out
}

// record is next as a stream record, keeping what reshard does not own.
func (s *streamActor) record(next reshard.Stream) persistence.StreamRecord {
	r := s.rec
	r.ShardCount, r.DrainingShards, r.MetadataVersion = next.ShardCount, normalizeShards(next.Draining), next.MetadataVersion
	r.Migrations = make([]persistence.MigrationRecord, len(next.Migrations))
	for i, m := range next.Migrations {
		r.Migrations[i] = persistence.MigrationRecord{Migration: m.Migration, RequestedBy: m.RequestedBy, Reason: m.Reason,
			ActivatedAt: m.ActivatedAt, DeprecatedAfter: m.DeprecatedAfter, RetiredShards: normalizeShards(m.RetiredShards), Note: m.Note}
	}
	return r
}

// migrate starts step, or queues it behind the step under way.
func (s *streamActor) migrate(ctx actor.Context, step migrationStep) {
	if s.stepping {
		if _, isCheck := step.msg.(*drainCheckMsg); isCheck && slices.ContainsFunc(s.queue, func(q migrationStep) bool {
			_, ok := q.msg.(*drainCheckMsg)
			return ok
		}) {
			return // one queued check does what two would
		}
		s.queue = append(s.queue, step)
		return
	}
	s.stepping = true
	answer := func(v any) {
		if step.sender != nil {
			ctx.Send(step.sender, v)
		}
	}
	done := func() {
		s.stepping = false
		if len(s.queue) > 0 {
			next := s.queue[0]
			s.queue = s.queue[1:]
			s.migrate(ctx, next)
		}
	}
	switch m := step.msg.(type) {
	case *scaleMsg:
		s.scale(ctx, m.req, answer, done)
	case *rollbackMsg:
		s.operator(ctx, m.req, answer, done, func(st reshard.Stream) reshard.Decision {
			return reshard.Rollback(st, m.id, m.req.RequestedBy, m.req.Reason, s.env.now(), s.reshardConfig())
		})
	case *completeMsg:
		s.operator(ctx, m.req, answer, done, func(st reshard.Stream) reshard.Decision {
			return reshard.Complete(st, m.id, m.req.RequestedBy, m.req.Reason, s.env.now(), s.reshardConfig())
		})
	case *drainCheckMsg:
		s.check(ctx, done)
	default:
		done()
	}
}

// failMigrationSteps answers every queued operator command with err (the
// stream actor is going away).
func (s *streamActor) failMigrationSteps(ctx actor.Context, err error) {
	for _, q := range s.queue {
		if q.sender == nil {
			continue
		}
		switch q.msg.(type) {
		case *scaleMsg:
			ctx.Send(q.sender, reply[protocol.ScaleResponse]{err: err})
		case *rollbackMsg, *completeMsg:
			ctx.Send(q.sender, reply[protocol.Migration]{err: err})
		}
	}
	s.queue = nil
}

func (s *streamActor) scale(ctx actor.Context, req protocol.ScaleRequest, answer func(any), done func()) {
	if err := s.unavailable(); err != nil {
		answer(reply[protocol.ScaleResponse]{err: err})
		done()
		return
	}
	target := *req.TargetShardCount
	r := reshard.Request{RequestedBy: req.RequestedBy, Reason: req.Reason}
	if req.DeprecatedAfter != nil {
		r.DeprecatedAfter = req.DeprecatedAfter.UTC()
	}
	d := reshard.Scale(s.stream(), target, r, s.env.now(), s.reshardConfig())
	s.run(ctx, d, func(d reshard.Decision, err error) {
		if err != nil {
			answer(reply[protocol.ScaleResponse]{err: err})
		} else {
			answer(reply[protocol.ScaleResponse]{value: s.scaleResponse(target, s.answerOf(d.Migration))})
		}
		done()
	})
}

// operator runs an operator's rollback or complete, decided by decide on
// the current record, and answers the migration as it ends up.
func (s *streamActor) operator(ctx actor.Context, req protocol.OperatorRequest, answer func(any), done func(),
	decide func(reshard.Stream) reshard.Decision,
) {
	if err := s.unavailable(); err != nil {
		answer(reply[protocol.Migration]{err: err})
		done()
		return
	}
	s.run(ctx, decide(s.stream()), func(d reshard.Decision, err error) {
		switch {
		case err != nil:
			answer(reply[protocol.Migration]{err: err})
		default:
			if d.Save != nil {
				s.log().Info("migration ended", slog.String("migration", d.Migration.ReshardingID), slog.String("state", string(d.Migration.State)),
					slog.String("by", req.RequestedBy), slog.String("reason", req.Reason))
			}
			answer(reply[protocol.Migration]{value: s.answerOf(d.Migration)})
		}
		done()
	})
}

// answerOf is the operator's view of migration m: as recorded now, with
// what it waits for; a migration never recorded (the no-op) as decided.
func (s *streamActor) answerOf(m *reshard.Migration) protocol.Migration {
	if rec := findIn(s.rec.Migrations, m.ReshardingID); rec != nil {
		return s.wire(*rec)
	}
	out := m.Migration
	out.Detail = m.Note
	return out
}

// check is the stream actor's timer: it steps the active migration as far
// as the facts allow, then schedules the next check if the decisions asked
// for one.
func (s *streamActor) check(ctx actor.Context, done func()) {
	if s.failed != nil || s.env.cfg.Redis == nil {
		done()
		return
	}
	resume := s.resume
	s.resume = false
	d := reshard.Check(s.stream(), reshard.Facts{Now: s.env.now(), Resume: resume, RoutedSince: s.routedFor()}, s.reshardConfig())
	s.run(ctx, d, func(_ reshard.Decision, err error) {
		if err != nil {
			s.log().Warn("migration check did not complete", slog.Any("error", err))
			// A step that failed (a refused write, a lost layout) is tried
			// again later; a failed provisioning waits for the operator.
			if m := s.activeMigration(); m != nil && m.State != protocol.MigrationPreparing && s.timer == nil {
				s.scheduleCheck(s.env.cfg.DrainCheckInterval)
			}
		}
		done()
	})
}

// run carries out d in the order reshard.Decision gives, feeding the
// outcome of its Redis work back to package reshard, and calls done with
// the last decision of the chain and its first error.
func (s *streamActor) run(ctx actor.Context, d reshard.Decision, done func(reshard.Decision, error)) {
	if d.Waiting != "" || d.Save != nil {
		s.waiting = d.Waiting
	}
	if d.Err != nil {
		done(d, d.Err)
		return
	}
	if !d.RoutedSince.IsZero() {
		s.routed = routedSince{count: s.rec.ShardCount, since: d.RoutedSince}
	}
	if d.Save != nil && d.Save.ShardCount != s.rec.ShardCount {
		// A new count: until every group is known to answer it, nobody
		// knows since when producers route by it.
		s.routed = routedSince{}
	}
	if d.Save != nil {
		if err := s.saveRecord(s.record(*d.Save)); err != nil {
			s.log().Error("migration step not recorded", slog.Any("error", err))
			done(d, err)
			return
		}
		if m := d.Migration; m != nil {
			s.log().Info("migration step recorded", slog.String("migration", m.ReshardingID), slog.String("state", string(m.State)),
				slog.Int("from", m.FromShardCount), slog.Int("to", m.ToShardCount), slog.Any("retired", m.RetiredShards))
		}
	}
	cfg := s.reshardConfig()
	next := func(layoutErr error) {
		switch {
		case d.ProvisionNeeded:
			id := d.Migration.ReshardingID
			s.provisionShards(ctx, d.Provision, nil, func(err error) {
				if err != nil {
					s.log().Warn("migration stays PREPARING", slog.String("migration", id), slog.Any("error", err))
				}
				s.run(ctx, reshard.Provisioned(s.stream(), id, err, s.env.now(), cfg), done)
			})
		case d.Gather != nil:
			s.gather(ctx, *d.Gather, func(f reshard.Facts) {
				s.run(ctx, reshard.Check(s.stream(), f, cfg), done)
			})
		case len(d.Delete) > 0:
			s.deleteKeys(ctx, d.Delete, func(err error) {
				if d.DeleteThenRetire {
					s.run(ctx, reshard.Retired(s.stream(), err, s.env.now(), cfg), done)
					return
				}
				// Forced retirement: deleting is best effort, the operator
				// asked to end the migration.
				done(d, layoutErr)
			})
		default:
			if !d.CheckAt.IsZero() {
				s.scheduleCheck(d.CheckAt.Sub(s.env.now()))
			}
			done(d, layoutErr)
		}
	}
	if d.Layout != nil {
		s.pushLayout(ctx, *d.Layout, d.LayoutTo, next)
		return
	}
	next(nil)
}

// after runs cont inside the actor once f completes, unless this
// incarnation of the stream actor is gone by then: a restarted one resumes
// from its record instead.
func (s *streamActor) after(ctx actor.Context, f *actor.Future, cont func(res any, err error)) {
	ctx.ReenterAfter(f, func(res any, err error) {
		if s.gone {
			return
		}
		cont(res, err)
	})
}

// provisionShards makes keys exist in Redis with every group of the stream
// on them, beside the actor, skipping the group actors in done (by PID, so
// that a group deleted and registered again counts as new). Groups
// registered while it runs are provisioned too before cont is called: each
// registration provisioned only the shards readable when it began. A
// failure is the 503 of docs/protocol.md §7.
func (s *streamActor) provisionShards(ctx actor.Context, keys []string, done map[string]bool, cont func(error)) {
	var groups, pids []string
	for _, name := range s.groupNames() {
		if id := s.groups[name].String(); !done[id] {
			groups, pids = append(groups, name), append(pids, id)
		}
	}
	s.provisionBeside(ctx, keys, groups, func(err error) {
		if err != nil || len(groups) == 0 {
			cont(err)
			return
		}
		if done == nil {
			done = map[string]bool{}
		}
		for _, id := range pids {
			done[id] = true
		}
		s.provisionShards(ctx, keys, done, cont)
	})
}

// provisionBeside creates keys with groups on them in Redis, beside the
// actor. A failure is the 503 of docs/protocol.md §7.
func (s *streamActor) provisionBeside(ctx actor.Context, keys, groups []string, cont func(error)) {
	r := s.env.cfg.Redis
	if r == nil || len(keys) == 0 || len(groups) == 0 {
		cont(nil)
		return
	}
	f := beside(s.env, s.env.cfg.RedisTimeout, func(c context.Context) error {
		return r.Provision(c, keys, groups)
	})
	s.after(ctx, f, func(res any, ferr error) {
		err, lost := besideValue[error](res, ferr)
		if err = errors.Join(err, lost); err != nil {
			err = fmt.Errorf("provision %d shard streams of %s: %w", len(keys), s.prefix, errors.Join(provisioningFailed(err), err))
		}
		cont(err)
	})
}

// deleteKeys deletes retired shard keys in Redis, beside the actor.
// Deleting a missing key is fine, so this is safe to repeat.
func (s *streamActor) deleteKeys(ctx actor.Context, keys []string, cont func(error)) {
	r := s.env.cfg.Redis
	f := beside(s.env, s.env.cfg.RedisTimeout, func(c context.Context) error {
		return r.Delete(c, keys...)
	})
	s.after(ctx, f, func(res any, ferr error) {
		err, lost := besideValue[error](res, ferr)
		if err = errors.Join(err, lost); err != nil {
			err = fmt.Errorf("delete retired shards %v of %s: %w", keys, s.prefix, err)
			s.log().Warn("removed shards not deleted", slog.Any("keys", keys), slog.Any("error", err))
		} else {
			s.log().Info("retired shard keys deleted", slog.Any("keys", keys))
		}
		cont(err)
	})
}

// askGroups asks each named group msg() and calls cont inside the actor
// once every one answered (or its ask timed out), with the answers in
// names' order. Unknown names answer an error.
func askGroups[T any](s *streamActor, ctx actor.Context, names []string, msg func() any, cont func([]T, []error)) {
	values, errs := make([]T, len(names)), make([]error, len(names))
	left := len(names)
	if left == 0 {
		cont(values, errs)
		return
	}
	for i, name := range names {
		pid := s.groups[name]
		if pid == nil {
			errs[i] = groupNotFound(s.prefix, name)
			if left--; left == 0 {
				cont(values, errs)
			}
			continue
		}
		f := ctx.RequestFuture(pid, msg(), s.env.cfg.AskTimeout)
		s.after(ctx, f, func(res any, err error) {
			values[i], errs[i] = replyValue[T](res, err)
			if left--; left == 0 {
				cont(values, errs)
			}
		})
	}
}

// pushLayout tells groups (every group when to is nil) the layout and calls
// cont once all answered, with the first failure. A group that did not take
// it is told again at a later check: the check compares its layout with the
// record.
func (s *streamActor) pushLayout(ctx actor.Context, l reshard.Layout, to []string, cont func(error)) {
	names := to
	if names == nil {
		names = s.groupNames()
	}
	msg := func() any {
		return &setLayoutMsg{shardCount: l.ShardCount, draining: slices.Clone(l.Draining), migration: l.Active}
	}
	askGroups[protocol.GroupResponse](s, ctx, names, msg, func(_ []protocol.GroupResponse, errs []error) {
		if to == nil && !slices.ContainsFunc(errs, func(err error) bool { return err != nil }) &&
			l.ShardCount == s.rec.ShardCount && s.routed.since.IsZero() {
			// Every group took the layout before it answered: from now on
			// none answers producers another count. (A group registered
			// meanwhile was given the record's layout when it was.) An
			// earlier known start for this count stays: a later layout
			// (a retirement) changes no routing.
			s.routed = routedSince{count: l.ShardCount, since: s.env.now()}
		}
		var first error
		for i, err := range errs {
			if err != nil {
				s.log().Error("group did not take the new layout", slog.String("group", names[i]), slog.Any("error", err))
				if first == nil {
					first = fmt.Errorf("group %s did not take the layout: %w", names[i], err)
				}
			}
		}
		cont(first)
	})
}

// gather reads what a check asked for: every group's layout and state
// (asks answered as continuations), then the drain facts of removed shards
// in Redis (beside the actor).
func (s *streamActor) gather(ctx actor.Context, g reshard.Gather, cont func(reshard.Facts)) {
	var names []string
	if g.Groups {
		names = s.groupNames()
	}
	askGroups[layoutStatus](s, ctx, names, func() any { return &layoutStatusMsg{} }, func(sts []layoutStatus, errs []error) {
		f := reshard.Facts{Gathered: true, RoutedSince: s.routedFor()}
		for i, st := range sts {
			f.Groups = append(f.Groups, reshard.GroupFacts{Name: names[i], ShardCount: st.shardCount, Draining: st.draining,
				State: string(st.state), Converged: st.state == protocol.GroupStable || st.state == protocol.GroupEmpty, Err: errs[i]})
		}
		if len(g.Shards) == 0 {
			f.Now = s.env.now()
			cont(f)
			return
		}
		r, prefix, timeout := s.env.cfg.Redis, s.prefix, s.env.cfg.RedisTimeout
		shards := slices.Clone(g.Shards)
		fut := beside(s.env, timeout, func(c context.Context) []reshard.ShardFacts {
			out := make([]reshard.ShardFacts, 0, len(shards))
			for _, shard := range shards {
				key := protocol.StreamKey(prefix, shard)
				facts, err := r.Inspect(c, key)
				out = append(out, shardFacts(shard, key, facts, err))
			}
			return out
		})
		s.after(ctx, fut, func(res any, ferr error) {
			read, lost := besideValue[[]reshard.ShardFacts](res, ferr)
			if lost != nil {
				read = nil
				for _, shard := range shards {
					read = append(read, reshard.ShardFacts{Shard: shard, Key: protocol.StreamKey(prefix, shard), Err: lost})
				}
			}
			f.Shards = read
			f.Now = s.env.now()
			cont(f)
		})
	})
}

// shardFacts is what Redis said of a removed shard, as reshard reads it.
func shardFacts(shard int, key string, f ShardFacts, err error) reshard.ShardFacts {
	out := reshard.ShardFacts{Shard: shard, Key: key, Exists: f.Exists, Err: err}
	for _, g := range f.Groups {
		out.Groups = append(out.Groups, reshard.GroupLag{Name: g.Name, Pending: g.Pending, Lag: g.Lag})
	}
	return out
}

// readableKeys are the keys of every readable shard: live and draining.
func (s *streamActor) readableKeys() []string {
	st := s.stream()
	return st.ReadableKeys()
}

func (s *streamActor) groupNames() []string {
	names := make([]string, 0, len(s.groups))
	for name := range s.groups {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// wire is the protocol view of m, with what the active migration waits for.
func (s *streamActor) wire(m persistence.MigrationRecord) protocol.Migration {
	out := m.Migration
	out.Detail = m.Note
	if active := s.activeMigration(); active != nil && active.ReshardingID == m.ReshardingID && s.waiting != "" {
		out.Detail = strings.TrimPrefix(out.Detail+"; "+s.waiting, "; ")
	}
	return out
}

func (s *streamActor) scheduleCheck(after time.Duration) {
	s.stopTimer()
	self, root := s.self, s.env.system.Root
	s.timer = time.AfterFunc(max(after, 0), func() { root.Send(self, &drainCheckMsg{}) })
}

func (s *streamActor) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// normalizeShards sorts shards and drops duplicates; never nil.
func normalizeShards(shards []int) []int {
	out := slices.Clone(shards)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []int{}
	}
	return out
}
