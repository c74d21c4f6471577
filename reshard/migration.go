package reshard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/clienttext"
)

// NoRedisNote is the note of migrations that run without Redis.
const NoRedisNote = "redis not configured: no stream provisioning and no drain proof; complete or roll back by hand"

// Request is an operator's scale request.
type Request struct {
	RequestedBy string
	Reason      string
	// DeprecatedAfter, when set, holds the migration ACTIVE until then.
	DeprecatedAfter time.Time
}

// Scale starts a stream-wide resharding to target shards (docs/protocol.md §7).
// A scale to the current count answers a no-op migration and saves nothing.
// A new migration is saved PREPARING before anything else happens, so that a
// crash or a failed provisioning leaves a record the same request resumes:
// asking again for the target of a PREPARING migration provisions again.
// Any other scale while a migration is active is ACTIVE_MIGRATION_EXISTS.
//
// The decision always asks for provisioning (ProvisionNeeded, possibly with
// no keys): the caller reports its outcome with [Provisioned].
func Scale(s Stream, target int, req Request, now time.Time, cfg Config) Decision {
	if active := s.Active(); active != nil {
		if active.State == protocol.MigrationPreparing && active.ToShardCount == target {
			return Decision{Migration: active, Provision: newKeys(&s, active, cfg), ProvisionNeeded: true}
		}
		return Decision{Err: protocol.Errorf(protocol.CodeActiveMigrationExists,
			fmt.Sprintf("migration %s of stream %q is %s; roll it back or let it finish first", active.ReshardingID, s.Prefix, active.State))}
	}
	if target == s.ShardCount {
		return Decision{Migration: noop(s, now)}
	}
	m := Migration{
		Migration: protocol.Migration{
			ReshardingID: fmt.Sprintf("rs-%d", len(s.Migrations)+1), FromShardCount: s.ShardCount, ToShardCount: target,
			State: protocol.MigrationPreparing, CreatedAt: now, UpdatedAt: now,
		},
		RequestedBy:     req.RequestedBy,
		Reason:          req.Reason,
		DeprecatedAfter: req.DeprecatedAfter,
		RetiredShards:   []int{},
	}
	if !cfg.Redis {
		m.Note = NoRedisNote
	}
	next := s.Clone()
	next.Migrations = append(next.Migrations, m)
	saved := next.Find(m.ReshardingID)
	return Decision{Save: &next, Migration: saved, Provision: newKeys(&next, saved, cfg), ProvisionNeeded: true}
}

// noop is the migration a scale to the current count answers: never
// recorded, DEPRECATED from its start, at the stream's count now. Rollback
// and Complete answer it as they answer any DEPRECATED migration, so that
// a client acting on the reshardingId it was given gets no 404.
func noop(s Stream, now time.Time) *Migration {
	return &Migration{Migration: protocol.Migration{ReshardingID: protocol.NoopReshardingID, FromShardCount: s.ShardCount,
		ToShardCount: s.ShardCount, State: protocol.MigrationDeprecated, CreatedAt: now, UpdatedAt: now}}
}

// isNoop reports whether id names the unrecorded no-op migration.
func isNoop(s Stream, id string) bool {
	return id == protocol.NoopReshardingID && s.Find(id) == nil
}

// newKeys are the keys a PREPARING migration adds, when Redis is there to
// create them.
func newKeys(s *Stream, m *Migration, cfg Config) []string {
	if !cfg.Redis || m.ToShardCount <= s.ShardCount {
		return nil
	}
	keys := make([]string, 0, m.ToShardCount-s.ShardCount)
	for i := s.ShardCount; i < m.ToShardCount; i++ {
		keys = append(keys, protocol.StreamKey(s.Prefix, i))
	}
	return keys
}

// Provisioned takes the outcome of provisioning migration id. On success
// the migration becomes ACTIVE: the new shard count is saved (the shards a
// scale-in removes become draining) and every group takes the layout. On
// failure it stays PREPARING and the operator gets
// REDIS_STREAM_PROVISIONING_FAILED (the *protocol.Error in err's chain
// when the caller classified what Redis said); the same request resumes
// it. A
// migration no longer PREPARING (another request activated it meanwhile)
// is answered as it is.
func Provisioned(s Stream, id string, err error, now time.Time, cfg Config) Decision {
	m := s.Find(id)
	if m == nil || m.State != protocol.MigrationPreparing {
		return Decision{Migration: m}
	}
	if err != nil {
		told := err
		var perr *protocol.Error
		if !errors.As(err, &perr) {
			// The caller says what Redis did (a refusal, no answer) when it
			// can; without that, the operator is told to repeat.
			told = errors.Join(protocol.Errorf(protocol.CodeRedisStreamProvisioningFailed,
				"creating the shard streams in Redis failed; repeat the request once Redis answers"), err)
		}
		return Decision{
			Err:     fmt.Errorf("provision the shard streams of %s: %w", s.Prefix, told),
			Waiting: "provisioning failed; repeat the scale request to resume: " + err.Error(),
		}
	}
	next := s.Clone()
	nm := next.Find(id)
	nm.State, nm.UpdatedAt, nm.ActivatedAt = protocol.MigrationActive, now, now
	next.Draining = drainingAfterScale(next.Draining, next.ShardCount, nm.ToShardCount)
	next.ShardCount = nm.ToShardCount
	next.MetadataVersion++
	layout := next.Layout()
	d := Decision{Save: &next, Layout: &layout, Migration: nm}
	if cfg.Redis {
		d.CheckAt = now.Add(cfg.CheckInterval)
	}
	return d
}

// Rollback undoes an ACTIVE migration: the shard count goes back at once
// (producers route over the old count from their next refresh). A
// rolled-back scale-in makes its removed shards live again and is
// ROLLED_BACK at once. A rolled-back scale-out is ROLLING_BACK: producers
// holding the scaled-out routing may still write to the added shards for
// one routing lease, and those writes succeed (the keys exist), so the
// added shards drain like a scale-in's removed shards (readable, assigned,
// retired once proven drained, no sooner than one routing lease after the
// rollback) and only then is the migration ROLLED_BACK. Taking them out of
// the layout at once would strand every record on them. Without Redis
// nothing can prove a drain, so a rollback is ROLLED_BACK at once there,
// as before (the added shards' records are left for the operator).
// Rolling back a ROLLING_BACK or ROLLED_BACK migration answers the same
// record; the no-op, DEPRECATED from its start, is ROLLBACK_NOT_ALLOWED.
func Rollback(s Stream, id string, by, reason string, now time.Time, cfg Config) Decision {
	if isNoop(s, id) {
		return Decision{Err: protocol.Errorf(protocol.CodeRollbackNotAllowed,
			"migration noop (a scale to the current shard count) is DEPRECATED; only a migration that is ACTIVE can become ROLLED_BACK")}
	}
	if m := s.Find(id); m != nil && m.State == protocol.MigrationRollingBack {
		return Decision{Migration: m}
	}
	d := end(s, id, by, reason, now, protocol.MigrationRolledBack, []protocol.MigrationState{protocol.MigrationActive},
		func(next *Stream, m *Migration) {
			if !cfg.Redis {
				next.Draining = slices.DeleteFunc(next.Draining, func(x int) bool { return x < m.FromShardCount })
				next.ShardCount = m.FromShardCount
				return
			}
			next.Draining = drainingAfterScale(next.Draining, next.ShardCount, m.FromShardCount)
			next.ShardCount = m.FromShardCount
			if len(next.Draining) > 0 {
				m.State = protocol.MigrationRollingBack
				m.Note = fmt.Sprintf("%s by %s: %s", m.State, by, reason)
				// The routing lease of the drain counts from the rollback,
				// the last change of the count producers route over.
				m.ActivatedAt = now
			}
		})
	if d.Save != nil && d.Migration.State == protocol.MigrationRollingBack {
		d.CheckAt = now.Add(cfg.CheckInterval)
	}
	return d
}

// Complete lets an operator end an ACTIVE or DRAINING migration whose drain
// cannot be proven: its draining shards are retired at once and it is
// DEPRECATED; a ROLLING_BACK one is ROLLED_BACK the same way. With the
// retire option their keys are deleted, best effort. A migration already
// DEPRECATED (the no-op included) is answered as it is.
func Complete(s Stream, id string, by, reason string, now time.Time, cfg Config) Decision {
	if isNoop(s, id) {
		return Decision{Migration: noop(s, now)}
	}
	final, from := protocol.MigrationDeprecated, []protocol.MigrationState{protocol.MigrationActive, protocol.MigrationDraining}
	if m := s.Find(id); m != nil && m.State == protocol.MigrationRollingBack {
		final, from = protocol.MigrationRolledBack, []protocol.MigrationState{protocol.MigrationRollingBack}
	}
	d := end(s, id, by, reason, now, final, from,
		func(next *Stream, m *Migration) {
			m.RetiredShards = normalize(append(m.RetiredShards, next.Draining...))
			next.Draining = []int{}
		})
	if d.Save != nil {
		d.Delete = retiredKeys(d.Save, d.Migration, cfg)
	}
	return d
}

// end moves migration id from one of the states in from to final, changing
// the record with change in the same write, and tells every group.
func end(s Stream, id, by, reason string, now time.Time, final protocol.MigrationState,
	from []protocol.MigrationState, change func(next *Stream, m *Migration),
) Decision {
	m := s.Find(id)
	switch {
	case m == nil:
		return Decision{Err: protocol.Errorf(protocol.CodeMigrationNotFound, fmt.Sprintf("stream %q has no migration %s", s.Prefix, clienttext.Quote(id)))}
	case m.State == final:
		return Decision{Migration: m}
	case !slices.Contains(from, m.State):
		return Decision{Err: protocol.Errorf(protocol.CodeRollbackNotAllowed,
			fmt.Sprintf("migration %s is %s; only a migration that is %s can become %s", id, m.State, oneOf(from), final))}
	}
	next := s.Clone()
	nm := next.Find(id)
	nm.State, nm.UpdatedAt = final, now
	nm.Note = fmt.Sprintf("%s by %s: %s", final, by, reason)
	change(&next, nm)
	next.MetadataVersion++
	layout := next.Layout()
	return Decision{Save: &next, Layout: &layout, Migration: nm}
}

// Check steps the active migration as far as the facts allow (docs/protocol.md
// §7), on the stream actor's timer:
//
//   - PREPARING: only on the first check after a restart (f.Resume) is the
//     provisioning retried; otherwise only a repeated request resumes it.
//   - ACTIVE: once one producer routing lease has passed since every
//     group is known to answer the new count (see routingLease),
//     deprecatedAfter has passed and every group converged on the layout:
//     DRAINING, retiring the removed shards already proven drained.
//   - ROLLING_BACK: like DRAINING, once the routing lease since the
//     rollback has passed; it ends ROLLED_BACK.
//   - DRAINING: each removed shard proven drained (a missing key, or every
//     consumer group on it with nothing pending and a known lag of 0) is
//     retired: saved, then taken out of every group's layout. Once none is
//     left and the groups converged again, the removed keys are deleted
//     (with the retire option; see [Retired]) and the migration is
//     DEPRECATED.
//
// A check that needs the groups' states or Redis facts first asks for them
// (Decision.Gather); the caller reads them beside the actor and checks
// again with f.Gathered set. Without Redis nothing is checked.
func Check(s Stream, f Facts, cfg Config) Decision {
	m := s.Active()
	if m == nil || !cfg.Redis {
		return Decision{}
	}
	later := f.Now.Add(cfg.CheckInterval)
	switch m.State {
	case protocol.MigrationPreparing:
		if !f.Resume {
			return Decision{}
		}
		return Decision{Migration: m, Provision: newKeys(&s, m, cfg), ProvisionNeeded: true}
	case protocol.MigrationActive:
		since, d, ok := routingLease(&s, m, f, cfg, later, "producer routing lease")
		if !ok {
			return d
		}
		if wait := m.DeprecatedAfter.Sub(f.Now); wait > 0 {
			return Decision{Waiting: fmt.Sprintf("deprecatedAfter %s: %v left", m.DeprecatedAfter.Format(time.RFC3339), wait.Round(time.Millisecond)),
				CheckAt: f.Now.Add(min(wait, cfg.CheckInterval)), RoutedSince: since}
		}
		if !f.Gathered {
			return gather(&s)
		}
		if d, ok := waitForGroups(&s, f, later); !ok {
			return d
		}
		next := s.Clone()
		nm := next.Active()
		nm.State, nm.UpdatedAt = protocol.MigrationDraining, f.Now
		retire(&next, nm, f)
		next.MetadataVersion++
		layout := next.Layout()
		// Check again as soon as the groups took the layout.
		return Decision{Save: &next, Layout: &layout, Migration: nm, CheckAt: f.Now, RoutedSince: since}
	case protocol.MigrationRollingBack:
		since, d, ok := routingLease(&s, m, f, cfg, later, "producer routing lease since the rollback")
		if !ok {
			return d
		}
		if !f.Gathered {
			return gather(&s)
		}
		d = drain(s, m, f, cfg, later, protocol.MigrationRolledBack)
		d.RoutedSince = since
		return d
	case protocol.MigrationDraining:
		if !f.Gathered {
			return gather(&s)
		}
		return drain(s, m, f, cfg, later, protocol.MigrationDeprecated)
	}
	return Decision{}
}

// routingLease waits for the producer routing lease of migration m (ACTIVE
// or ROLLING_BACK): no shard a producer may still route to by the
// previous count retires before it has passed. It counts from the time
// since which every group is known to answer the record's count (never
// from before m.ActivatedAt, the last change of that count): a group that
// missed the layout, say because its write failed, keeps answering the
// previous count with a fresh lease until it takes the layout, however
// long after the activation that is. When that time is not known, the
// groups are asked (and those behind are told the layout again); the
// first check that sees every group on the count starts the lease.
//
// ok is true once the lease has passed; since is its start, for
// Decision.RoutedSince. Otherwise d is the decision to return.
func routingLease(s *Stream, m *Migration, f Facts, cfg Config, later time.Time, what string) (since time.Time, d Decision, ok bool) {
	since = f.RoutedSince
	if since.IsZero() || since.Before(m.ActivatedAt) {
		since = time.Time{}
		if !f.Gathered {
			return since, Decision{Gather: &Gather{Groups: true}}, false
		}
		onCount := true
		for _, g := range f.Groups {
			onCount = onCount && g.Err == nil && g.ShardCount == s.ShardCount
		}
		if !onCount {
			d, _ := waitForGroups(s, f, later)
			d.Waiting = what + " not started: " + d.Waiting
			return since, d, false
		}
		since = f.Now
	}
	if wait := since.Add(cfg.RoutingLease).Sub(f.Now); wait > 0 {
		return since, Decision{Waiting: fmt.Sprintf("%s: %v left", what, wait.Round(time.Millisecond)),
			CheckAt: f.Now.Add(min(wait, cfg.CheckInterval)), RoutedSince: since}, false
	}
	return since, Decision{}, true
}

// drain steps a DRAINING (or ROLLING_BACK) migration m of s on gathered
// facts: it retires the draining shards proven drained; once none is left
// and every group converged, it deletes the retired keys (with the retire
// option) and then ends the migration as final.
func drain(s Stream, m *Migration, f Facts, cfg Config, later time.Time, final protocol.MigrationState) Decision {
	next := s.Clone()
	nm := next.Active()
	if retire(&next, nm, f) {
		nm.UpdatedAt = f.Now
		next.MetadataVersion++
		layout := next.Layout()
		return Decision{Save: &next, Layout: &layout, Migration: nm, CheckAt: f.Now}
	}
	if len(s.Draining) > 0 {
		return Decision{Waiting: "drain not proven: " + unproven(&s, f), CheckAt: later}
	}
	if d, ok := waitForGroups(&s, f, later); !ok {
		return d
	}
	if keys := retiredKeys(&s, m, cfg); len(keys) > 0 {
		return Decision{Migration: m, Delete: keys, DeleteThenRetire: true}
	}
	return finish(s, f.Now, final)
}

// Retired takes the outcome of deleting the retired keys of the active
// DRAINING (or ROLLING_BACK) migration: DEPRECATED (or ROLLED_BACK) once
// they are gone, else a later check tries again.
func Retired(s Stream, err error, now time.Time, cfg Config) Decision {
	m := s.Active()
	if m == nil || len(s.Draining) > 0 {
		return Decision{}
	}
	final := protocol.MigrationDeprecated
	switch m.State {
	case protocol.MigrationDraining:
	case protocol.MigrationRollingBack:
		final = protocol.MigrationRolledBack
	default:
		return Decision{}
	}
	if err != nil {
		return Decision{Waiting: "removed shards not deleted yet: " + err.Error(), CheckAt: now.Add(cfg.CheckInterval)}
	}
	return finish(s, now, final)
}

// finish ends the active migration of s as final.
func finish(s Stream, now time.Time, final protocol.MigrationState) Decision {
	next := s.Clone()
	nm := next.Active()
	nm.State, nm.UpdatedAt = final, now
	next.MetadataVersion++
	layout := next.Layout()
	return Decision{Save: &next, Layout: &layout, Migration: nm}
}

func gather(s *Stream) Decision {
	return Decision{Gather: &Gather{Groups: true, Shards: slices.Clone(s.Draining)}}
}

// waitForGroups reports whether every group runs the record's layout and
// is STABLE or EMPTY; otherwise the decision says which is not, and tells
// the layout again to groups that missed it (a failed write lost it).
func waitForGroups(s *Stream, f Facts, later time.Time) (Decision, bool) {
	var lagging, why []string
	for _, g := range f.Groups {
		switch {
		case g.Err != nil:
			why = append(why, fmt.Sprintf("group %s: %v", g.Name, g.Err))
		case g.ShardCount != s.ShardCount || !slices.Equal(normalize(g.Draining), normalize(s.Draining)):
			lagging = append(lagging, g.Name)
			why = append(why, fmt.Sprintf("group %s has not taken the layout yet", g.Name))
		case !g.Converged:
			why = append(why, fmt.Sprintf("group %s is %s", g.Name, g.State))
		}
	}
	if len(why) == 0 {
		return Decision{}, true
	}
	d := Decision{Waiting: strings.Join(why, "; "), CheckAt: later}
	if len(lagging) > 0 {
		layout := s.Layout()
		d.Layout, d.LayoutTo = &layout, lagging
	}
	return d, false
}

// retire takes the draining shards proven drained out of next and records
// them as retired by m. It reports whether any was.
func retire(next *Stream, m *Migration, f Facts) bool {
	var proven []int
	for _, sf := range f.Shards {
		if ok, _ := Proof(sf); ok && slices.Contains(next.Draining, sf.Shard) {
			proven = append(proven, sf.Shard)
		}
	}
	if len(proven) == 0 {
		return false
	}
	next.Draining = slices.DeleteFunc(next.Draining, func(x int) bool { return slices.Contains(proven, x) })
	m.RetiredShards = normalize(append(m.RetiredShards, proven...))
	return true
}

// unproven says why the draining shards of s are not proven drained.
func unproven(s *Stream, f Facts) string {
	var why []string
	for _, shard := range s.Draining {
		found := false
		for _, sf := range f.Shards {
			if sf.Shard == shard {
				found = true
				if _, reason := Proof(sf); reason != "" {
					why = append(why, reason)
				}
			}
		}
		if !found {
			why = append(why, fmt.Sprintf("%s: not read", protocol.StreamKey(s.Prefix, shard)))
		}
	}
	return strings.Join(why, "; ")
}

// Proof tells whether a removed shard is proven drained: a missing key, or
// every consumer group on it with nothing pending and a known lag of 0.
// Otherwise it says why not, for monitoring.
func Proof(f ShardFacts) (bool, string) {
	if f.Err != nil {
		return false, fmt.Sprintf("%s: %v", f.Key, f.Err)
	}
	if !f.Exists {
		return true, ""
	}
	var why []string
	for _, g := range f.Groups {
		switch {
		case g.Pending > 0:
			why = append(why, fmt.Sprintf("%s group %s has %d pending", f.Key, g.Name, g.Pending))
		case g.Lag == nil:
			why = append(why, fmt.Sprintf("%s group %s lag unknown", f.Key, g.Name))
		case *g.Lag > 0:
			why = append(why, fmt.Sprintf("%s group %s lag %d", f.Key, g.Name, *g.Lag))
		}
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// retiredKeys are the keys of the shards m retired that are not live again,
// when Redis is there and the retire option is on.
func retiredKeys(s *Stream, m *Migration, cfg Config) []string {
	if !cfg.Redis || !cfg.RetireRemoved || m == nil {
		return nil
	}
	var keys []string
	for _, shard := range m.RetiredShards {
		if shard >= s.ShardCount {
			keys = append(keys, protocol.StreamKey(s.Prefix, shard))
		}
	}
	return keys
}

// oneOf names states for a person: "ACTIVE", "ACTIVE or DRAINING".
func oneOf(states []protocol.MigrationState) string {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
