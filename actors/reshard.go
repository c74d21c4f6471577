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

	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/protocol"
)

// Resharding (docs/protocol.md §7), as the stream actor runs it. Every state
// change is written to the stream record before it is acted on, so that a
// restarted stream actor resumes from its record:
//
//  1. PREPARING is recorded before any Redis call.
//  2. With Redis, the new shards are provisioned for every group
//     (XGROUP CREATE … 0 MKSTREAM). A failure answers 503 and leaves the
//     migration PREPARING; the same request again resumes it.
//  3. ACTIVE: the new shard count is recorded (removed shards of a
//     scale-in become draining) and every group takes the layout.
//  4. On the stream actor's timer: once every group has converged on the
//     layout and one producer routing lease has passed since activation,
//     DRAINING (until then an operator may roll back).
//  5. Each removed shard proven drained in Redis (pending 0 and a known
//     lag 0 for every consumer group on it) is retired: recorded, then
//     taken out of every group's layout.
//  6. Once none is left and the groups converged again, the removed keys
//     are deleted (with the retire option) and the migration is
//     DEPRECATED.
//
// Without Redis, 2 and 4–6 are skipped: the migration stays ACTIVE until
// an operator completes or rolls it back, and its record says why.

// noRedisNote is the detail of migrations that run without Redis.
const noRedisNote = "redis not configured: no stream provisioning and no drain proof; complete or roll back by hand"

func (s *streamActor) scale(req protocol.ScaleRequest) reply {
	if err := s.unavailable(); err != nil {
		return reply{err: err}
	}
	target := *req.TargetShardCount
	if active := s.activeMigration(); active != nil {
		if active.State == protocol.MigrationPreparing && active.ToShardCount == target {
			// The same request again: resume the provisioning that failed.
			return s.prepare(active.ReshardingID)
		}
		return reply{err: protocol.Errorf(protocol.CodeActiveMigrationExists,
			fmt.Sprintf("migration %s of stream %q is %s; roll it back or let it finish first", active.ReshardingID, s.prefix, active.State))}
	}
	now := s.env.now()
	if target == s.rec.ShardCount {
		noop := protocol.Migration{ReshardingID: protocol.NoopReshardingID, FromShardCount: target, ToShardCount: target,
			State: protocol.MigrationDeprecated, CreatedAt: now, UpdatedAt: now}
		return reply{value: s.scaleResponse(target, noop)}
	}
	mig := persistence.MigrationRecord{
		Migration: protocol.Migration{
			ReshardingID: fmt.Sprintf("rs-%d", len(s.rec.Migrations)+1), FromShardCount: s.rec.ShardCount, ToShardCount: target,
			State: protocol.MigrationPreparing, CreatedAt: now, UpdatedAt: now,
		},
		RequestedBy:   req.RequestedBy,
		Reason:        req.Reason,
		RetiredShards: []int{},
	}
	if req.DeprecatedAfter != nil {
		mig.DeprecatedAfter = req.DeprecatedAfter.UTC()
	}
	if s.env.cfg.Redis == nil {
		mig.Note = noRedisNote
	}
	// PREPARING is durable before anything else happens, so a crash or a
	// failed provisioning leaves a record that a repeated request resumes.
	next := cloneRecord(s.rec)
	next.Migrations = append(next.Migrations, mig)
	if err := s.saveRecord(next); err != nil {
		return reply{err: err}
	}
	return s.prepare(mig.ReshardingID)
}

// prepare provisions the shards a PREPARING migration adds and activates
// it.
func (s *streamActor) prepare(id string) reply {
	mig := findIn(s.rec.Migrations, id)
	from, target := s.rec.ShardCount, mig.ToShardCount
	if target > from {
		keys := make([]string, 0, target-from)
		for i := from; i < target; i++ {
			keys = append(keys, protocol.StreamKey(s.prefix, i))
		}
		if err := s.provision(keys, s.groupNames()); err != nil {
			s.log().Warn("migration stays PREPARING", slog.String("migration", id), slog.Any("error", err))
			return reply{err: err}
		}
	}
	now := s.env.now()
	next := cloneRecord(s.rec)
	m := findIn(next.Migrations, id)
	m.State, m.UpdatedAt, m.ActivatedAt = protocol.MigrationActive, now, now
	next.DrainingShards = drainingAfterScale(next.DrainingShards, from, target)
	next.ShardCount = target
	next.MetadataVersion++
	if err := s.saveRecord(next); err != nil {
		return reply{err: err}
	}
	s.log().Info("migration ACTIVE", slog.String("migration", id), slog.Int("from", mig.FromShardCount), slog.Int("to", target))
	active := s.wire(*findIn(s.rec.Migrations, id))
	if err := s.applyLayout(&active); err != nil {
		return reply{err: err}
	}
	if s.env.cfg.Redis != nil {
		s.scheduleCheck(s.env.cfg.DrainCheckInterval)
	}
	return reply{value: s.scaleResponse(target, active)}
}

// provision creates keys with every group on them, when Redis is
// configured. A failure is the 503 of docs/protocol.md §7.
func (s *streamActor) provision(keys, groups []string) error {
	r := s.env.cfg.Redis
	if r == nil || len(keys) == 0 || len(groups) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.RedisTimeout)
	defer cancel()
	if err := r.Provision(ctx, keys, groups); err != nil {
		return fmt.Errorf("provision %d shard streams of %s: %w", len(keys), s.prefix, errors.Join(
			protocol.Errorf(protocol.CodeRedisStreamProvisioningFailed, "creating the shard streams in Redis failed; repeat the request once Redis answers"), err))
	}
	return nil
}

// readableKeys are the keys of every readable shard: live and draining.
func (s *streamActor) readableKeys() []string {
	keys := make([]string, 0, s.rec.ShardCount+len(s.rec.DrainingShards))
	for i := range s.rec.ShardCount {
		keys = append(keys, protocol.StreamKey(s.prefix, i))
	}
	for _, i := range s.rec.DrainingShards {
		keys = append(keys, protocol.StreamKey(s.prefix, i))
	}
	return keys
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
	s.timer = time.AfterFunc(after, func() { root.Send(self, &drainCheckMsg{}) })
}

func (s *streamActor) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// drainCheck steps the active migration as far as the facts allow, then
// schedules the next check while one is active.
func (s *streamActor) drainCheck() {
	mig := s.activeMigration()
	if mig == nil || s.failed != nil || s.env.cfg.Redis == nil {
		return
	}
	id := mig.ReshardingID
	switch mig.State {
	case protocol.MigrationPreparing:
		if !s.resume {
			return // only a repeated request resumes a failed provisioning
		}
		s.resume = false
		if r := s.prepare(id); r.err != nil {
			return
		}
	case protocol.MigrationActive:
		s.stepActive(mig)
	case protocol.MigrationDraining:
		s.stepDraining(mig)
	}
	if s.activeMigration() != nil {
		s.scheduleCheck(s.env.cfg.DrainCheckInterval)
	}
}

// stepActive moves an ACTIVE migration to DRAINING once every group has
// converged and a producer routing lease has passed since activation.
func (s *streamActor) stepActive(mig *persistence.MigrationRecord) {
	now := s.env.now()
	if wait := mig.ActivatedAt.Add(s.env.cfg.ProducerRoutingLease).Sub(now); wait > 0 {
		s.waiting = fmt.Sprintf("producer routing lease: %v left", wait.Round(time.Millisecond))
		return
	}
	if wait := mig.DeprecatedAfter.Sub(now); wait > 0 {
		s.waiting = fmt.Sprintf("deprecatedAfter %s: %v left", mig.DeprecatedAfter.Format(time.RFC3339), wait.Round(time.Millisecond))
		return
	}
	if ok, why := s.converged(); !ok {
		s.waiting = why
		return
	}
	if err := s.setState(mig.ReshardingID, protocol.MigrationDraining, nil); err != nil {
		return
	}
	s.stepDraining(findIn(s.rec.Migrations, mig.ReshardingID))
}

// stepDraining retires every draining shard proven drained, and ends the
// migration once none is left.
func (s *streamActor) stepDraining(mig *persistence.MigrationRecord) {
	id := mig.ReshardingID
	var proven, why []string
	var retire []int
	for _, shard := range s.rec.DrainingShards {
		key := protocol.StreamKey(s.prefix, shard)
		ctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.RedisTimeout)
		facts, err := s.env.cfg.Redis.Inspect(ctx, key)
		cancel()
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		ok, reason := drainProof(facts)
		if !ok {
			why = append(why, reason)
			continue
		}
		retire = append(retire, shard)
		proven = append(proven, key)
	}
	if len(retire) > 0 {
		err := s.setState(id, protocol.MigrationDraining, func(next *persistence.StreamRecord, m *persistence.MigrationRecord) {
			next.DrainingShards = slices.DeleteFunc(next.DrainingShards, func(x int) bool { return slices.Contains(retire, x) })
			m.RetiredShards = normalizeShards(append(m.RetiredShards, retire...))
		})
		if err != nil {
			return
		}
		s.log().Info("removed shards proven drained and retired", slog.String("migration", id), slog.Any("shards", proven))
	}
	if len(s.rec.DrainingShards) > 0 {
		s.waiting = "drain not proven: " + strings.Join(why, "; ")
		return
	}
	if ok, reason := s.converged(); !ok {
		s.waiting = reason
		return
	}
	mig = findIn(s.rec.Migrations, id)
	if err := s.deleteRetired(*mig); err != nil {
		s.waiting = err.Error()
		s.log().Warn("removed shards not deleted yet", slog.String("migration", id), slog.Any("error", err))
		return
	}
	if err := s.setState(id, protocol.MigrationDeprecated, nil); err != nil {
		return
	}
	s.log().Info("migration DEPRECATED", slog.String("migration", id), slog.Any("retired", mig.RetiredShards))
}

// setState records migration id in state (changed further by change, if
// any) and tells every group the layout.
func (s *streamActor) setState(id string, state protocol.MigrationState,
	change func(next *persistence.StreamRecord, m *persistence.MigrationRecord),
) error {
	next := cloneRecord(s.rec)
	m := findIn(next.Migrations, id)
	m.RetiredShards = slices.Clone(m.RetiredShards)
	m.State, m.UpdatedAt = state, s.env.now()
	if change != nil {
		change(&next, m)
	}
	next.MetadataVersion++
	if err := s.saveRecord(next); err != nil {
		s.log().Error("migration step not recorded", slog.String("migration", id), slog.String("state", string(state)), slog.Any("error", err))
		return err
	}
	s.waiting = ""
	var active *protocol.Migration
	if state != protocol.MigrationDeprecated {
		w := s.wire(*findIn(s.rec.Migrations, id))
		active = &w
	}
	// A group that did not take the layout is told again at the next
	// check: converged compares its layout with the record.
	_ = s.applyLayout(active)
	return nil
}

// converged reports whether every group runs the record's layout and is
// STABLE or EMPTY; otherwise it says which is not.
func (s *streamActor) converged() (bool, string) {
	for _, name := range s.groupNames() {
		res, err := s.env.system.Root.RequestFuture(s.groups[name], &layoutStatusMsg{}, s.env.cfg.AskTimeout).Result()
		if err == nil {
			err = res.(reply).err
		}
		if err != nil {
			return false, fmt.Sprintf("group %s: %v", name, err)
		}
		st := res.(reply).value.(layoutStatus)
		if st.shardCount != s.rec.ShardCount || !slices.Equal(normalizeShards(st.draining), normalizeShards(s.rec.DrainingShards)) {
			// Lost a layout message (a failed write): tell it again.
			_ = s.applyLayout(s.activeWire())
			return false, fmt.Sprintf("group %s has not taken the layout yet", name)
		}
		if st.state != protocol.GroupStable && st.state != protocol.GroupEmpty {
			return false, fmt.Sprintf("group %s is %s", name, st.state)
		}
	}
	return true, ""
}

func (s *streamActor) activeWire() *protocol.Migration {
	if m := s.activeMigration(); m != nil {
		w := s.wire(*m)
		return &w
	}
	return nil
}

// deleteRetired deletes the keys of the shards m retired, with the retire
// option on. Deleting a missing key is fine, so this is safe to repeat.
func (s *streamActor) deleteRetired(m persistence.MigrationRecord) error {
	r := s.env.cfg.Redis
	if r == nil || !s.env.cfg.RetireRemovedShards || len(m.RetiredShards) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m.RetiredShards))
	for _, shard := range m.RetiredShards {
		if shard >= s.rec.ShardCount { // never a shard live again
			keys = append(keys, protocol.StreamKey(s.prefix, shard))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.RedisTimeout)
	defer cancel()
	if err := r.Delete(ctx, keys...); err != nil {
		return fmt.Errorf("delete retired shards %v of %s: %w", m.RetiredShards, s.prefix, err)
	}
	s.log().Info("retired shard keys deleted", slog.String("migration", m.ReshardingID), slog.Any("keys", keys))
	return nil
}

// drainingAfterScale is the set of removed shards still to drain after a
// scale from one count to another: shards cut by a scale-in are added,
// shards that a scale-out brings back into range are live again.
func drainingAfterScale(draining []int, from, to int) []int {
	set := map[int]bool{}
	for _, s := range draining {
		set[s] = true
	}
	for s := to; s < from; s++ {
		set[s] = true
	}
	out := []int{}
	for s := range set {
		if s >= to {
			out = append(out, s)
		}
	}
	sort.Ints(out)
	return out
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
