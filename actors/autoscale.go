package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/reshard"
)

// Autoscaling as the stream actor executes it. Package reshard decides
// (reshard.Autoscale); this file samples the live shards in Redis beside
// the actor on a timer of its own, keeps the samples of about one
// cooldown, reports every decision (an audit entry, a metric, the log)
// and, in mode on, scales through the operator's path: a scaleMsg queued
// like any other migration step, so provisioning, the routing lease, the
// drain proofs and retirement are those of a scale an operator asked for.
// Only the actor of the stream decides, and in the cluster mode it runs on
// the stream's owner replica alone.

// DefaultAutoscaleInterval is [Config.AutoscaleInterval] when unset.
const DefaultAutoscaleInterval = 15 * time.Second

// AutoscaleRequester is the requestedBy of the migrations autoscaling
// starts and of its audit entries.
const AutoscaleRequester = "autoscale"

// ShardMemory reads what shard keys take in Redis's memory.
type ShardMemory interface {
	// MemoryUsage returns the bytes each key takes (MEMORY USAGE), in the
	// order of keys, -1 for a key that does not exist.
	MemoryUsage(ctx context.Context, keys []string) ([]int64, error)
}

// AutoscaleObserver is what an [Observer] may implement to count the
// autoscaling decisions that were not none.
type AutoscaleObserver interface {
	AutoscaleDecision(prefix string, action string)
}

// Messages of autoscaling, handled by the stream actor.
type (
	// autoscaleTickMsg is the autoscale timer firing.
	autoscaleTickMsg struct{}
	// setAutoscaleMsg replaces the policy, answered with a reply of
	// protocol.AutoscaleResponse.
	setAutoscaleMsg struct {
		policy reshard.AutoscalePolicy
		by     string
	}
	// getAutoscaleMsg asks for the policy and the last decision.
	getAutoscaleMsg struct{}
)

// autoscaler is the stream actor's autoscaling state; none of it is
// durable but the policy and the last decision to scale, in the record.
type autoscaler struct {
	timer *time.Timer
	// sampling is set while a sample is read beside the actor.
	sampling bool
	samples  []reshard.LoadSample
	// last is the latest decision, none included; it is shown until the
	// record keeps a decision to scale.
	last *protocol.AutoscaleDecision
}

func (a *autoscaler) stop() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

// receiveAutoscale handles the autoscaling messages; others are ignored.
func (s *streamActor) receiveAutoscale(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *autoscaleTickMsg:
		s.auto.timer = nil
		s.autoscaleTick(ctx)
	case *setAutoscaleMsg:
		if err := s.unavailable(); err != nil {
			ctx.Respond(reply[protocol.AutoscaleResponse]{err: err})
			return
		}
		ctx.Respond(s.setAutoscale(m))
	case *getAutoscaleMsg:
		if err := s.unavailable(); err != nil {
			ctx.Respond(reply[protocol.AutoscaleResponse]{err: err})
			return
		}
		ctx.Respond(reply[protocol.AutoscaleResponse]{value: s.autoscaleView()})
	}
}

// policy is the record's policy with its defaults; mode off when none.
func (s *streamActor) policy() reshard.AutoscalePolicy {
	r := s.rec.Autoscale
	if r == nil {
		return reshard.AutoscalePolicy{}.WithDefaults(s.env.cfg.MaxShards)
	}
	return reshard.AutoscalePolicy{Mode: reshard.AutoscaleMode(r.Mode), MaxShardLength: r.MaxShardLength,
		MaxShardMemoryBytes: r.MaxShardMemoryBytes, MaxShardAppendsPerSecond: r.MaxShardAppendsPerSecond,
		LowWatermark: r.LowWatermark, MinShards: r.MinShards, MaxShards: r.MaxShards, Cooldown: r.Cooldown,
	}.WithDefaults(s.env.cfg.MaxShards)
}

// startAutoscale starts sampling when the record has a policy to run.
func (s *streamActor) startAutoscale() {
	if s.policy().Mode != reshard.AutoscaleOff && s.env.cfg.Redis != nil && s.auto.timer == nil {
		s.scheduleAutoscale(0)
	}
}

func (s *streamActor) scheduleAutoscale(after time.Duration) {
	s.auto.stop()
	self, root := s.self, s.env.system.Root
	s.auto.timer = time.AfterFunc(max(after, 0), func() { root.Send(self, &autoscaleTickMsg{}) })
}

// setAutoscale saves a new policy, keeping the last decision, and starts
// or stops sampling.
func (s *streamActor) setAutoscale(m *setAutoscaleMsg) reply[protocol.AutoscaleResponse] {
	p := m.policy
	next := s.rec
	rec := &persistence.AutoscaleRecord{Mode: string(p.Mode), MaxShardLength: p.MaxShardLength, MaxShardMemoryBytes: p.MaxShardMemoryBytes,
		MaxShardAppendsPerSecond: p.MaxShardAppendsPerSecond, LowWatermark: p.LowWatermark, MinShards: p.MinShards,
		MaxShards: p.MaxShards, Cooldown: p.Cooldown, RequestedBy: m.by, UpdatedAt: s.env.now()}
	if old := s.rec.Autoscale; old != nil {
		rec.LastDecision = old.LastDecision
	}
	next.Autoscale = rec
	if err := s.saveRecord(next); err != nil {
		return reply[protocol.AutoscaleResponse]{err: err}
	}
	s.log().Info("autoscale policy set", slog.String("mode", rec.Mode), slog.String("by", m.by))
	if p.Mode == reshard.AutoscaleOff {
		s.auto.stop()
		s.auto.samples = nil
	} else {
		s.startAutoscale()
	}
	return reply[protocol.AutoscaleResponse]{value: s.autoscaleView()}
}

// autoscaleView is the answer of GET /streams/{p}/autoscale.
func (s *streamActor) autoscaleView() protocol.AutoscaleResponse {
	p := s.policy()
	out := protocol.AutoscaleResponse{Stream: s.prefix, Policy: protocol.AutoscalePolicy{
		Mode: string(p.Mode), LowWatermark: p.LowWatermark, MinShards: p.MinShards, MaxShards: p.MaxShards,
		CooldownSeconds: int64(p.Cooldown / time.Second),
	}}
	if p.MaxShardLength > 0 {
		out.Policy.MaxShardLength = &p.MaxShardLength
	}
	if p.MaxShardMemoryBytes > 0 {
		out.Policy.MaxShardMemoryBytes = &p.MaxShardMemoryBytes
	}
	if p.MaxShardAppendsPerSecond > 0 {
		out.Policy.MaxShardAppendsPerSecond = &p.MaxShardAppendsPerSecond
	}
	if r := s.rec.Autoscale; r != nil {
		out.Policy.RequestedBy = r.RequestedBy
		if !r.UpdatedAt.IsZero() {
			at := r.UpdatedAt
			out.Policy.UpdatedAt = &at
		}
		if d := r.LastDecision; d != nil {
			out.LastDecision = &protocol.AutoscaleDecision{Action: d.Action, FromShards: d.From, ToShards: d.To, Reason: d.Reason, At: d.At, Taken: d.Taken}
		}
	}
	if s.auto.last != nil && out.LastDecision == nil {
		d := *s.auto.last
		out.LastDecision = &d
	}
	return out
}

// autoscaleTick samples the live shards beside the actor, then decides.
func (s *streamActor) autoscaleTick(ctx actor.Context) {
	p := s.policy()
	r := s.env.cfg.Redis
	if s.failed != nil || r == nil || p.Mode == reshard.AutoscaleOff {
		return
	}
	if s.auto.sampling {
		return
	}
	s.resumeAutoscaled(ctx, p)
	if s.activeMigration() != nil {
		// Nothing is decided while a migration runs; its samples would be
		// of a count about to change.
		s.auto.samples = nil
		s.decide(ctx, p)
		return
	}
	s.auto.sampling = true
	prefix, n, mem := s.prefix, s.rec.ShardCount, s.env.cfg.ShardMemory
	if p.MaxShardMemoryBytes == 0 {
		mem = nil
	}
	f := beside(s.env, s.env.cfg.RedisTimeout, func(c context.Context) reshard.LoadSample {
		return readLoad(c, r, mem, prefix, n)
	})
	s.after(ctx, f, func(res any, ferr error) {
		s.auto.sampling = false
		sample, lost := besideValue[reshard.LoadSample](res, ferr)
		if lost != nil {
			sample = reshard.LoadSample{ShardCount: n, Err: lost}
		}
		sample.At = s.env.now()
		s.keepSample(sample, p)
		s.decide(ctx, p)
	})
}

// readLoad reads the length, appends and (with mem) memory of the live
// shards 0..n-1 of prefix. Any failure makes the sample an error: part of
// the shards tells nothing of the fullest.
func readLoad(ctx context.Context, r StreamRedis, mem ShardMemory, prefix string, n int) reshard.LoadSample {
	out := reshard.LoadSample{ShardCount: n, Shards: make([]reshard.ShardLoad, n)}
	keys := make([]string, n)
	for i := range n {
		keys[i] = protocol.StreamKey(prefix, i)
		f, err := r.Inspect(ctx, keys[i])
		if err != nil {
			return reshard.LoadSample{ShardCount: n, Err: err}
		}
		out.Shards[i] = reshard.ShardLoad{Length: f.Length, Added: f.EntriesAdded, MemoryBytes: -1}
	}
	if mem == nil || n == 0 {
		return out
	}
	bytes, err := mem.MemoryUsage(ctx, keys)
	if err != nil {
		return reshard.LoadSample{ShardCount: n, Err: fmt.Errorf("memory usage: %w", err)}
	}
	for i := range min(n, len(bytes)) {
		out.Shards[i].MemoryBytes = max(bytes[i], 0)
	}
	return out
}

// keepSample adds sample and forgets those older than one cooldown but the
// last of them, which starts the window the decision reads.
func (s *streamActor) keepSample(sample reshard.LoadSample, p reshard.AutoscalePolicy) {
	all := append(s.auto.samples, sample)
	from := sample.At.Add(-p.Cooldown - s.env.cfg.AutoscaleInterval)
	i := 0
	for i+1 < len(all) && all[i+1].At.Before(from) {
		i++
	}
	s.auto.samples = append([]reshard.LoadSample(nil), all[i:]...)
}

// decide runs the policy on the samples, reports its decision and, in mode
// on, scales; then it schedules the next tick.
func (s *streamActor) decide(ctx actor.Context, p reshard.AutoscalePolicy) {
	defer s.scheduleAutoscale(s.env.cfg.AutoscaleInterval)
	f := reshard.AutoscaleFacts{Now: s.env.now(), Stream: s.stream(), Samples: s.auto.samples, Limit: s.env.cfg.MaxShards}
	if r := s.rec.Autoscale; r != nil && r.LastDecision != nil && !r.LastDecision.Taken {
		f.LastReported = r.LastDecision.At
	}
	d := reshard.Autoscale(p, f)
	taken := d.Action != reshard.ActionNone && p.Mode == reshard.AutoscaleOn
	s.auto.last = &protocol.AutoscaleDecision{Action: string(d.Action), FromShards: d.From, ToShards: d.To, Reason: d.Reason, At: f.Now, Taken: taken}
	if d.Action == reshard.ActionNone {
		return
	}
	s.reportDecision(d, p.Mode, taken, f.Now)
	if taken {
		to := d.To
		s.migrate(ctx, migrationStep{msg: &scaleMsg{req: protocol.ScaleRequest{TargetShardCount: &to,
			RequestedBy: AutoscaleRequester, Reason: string(d.Action) + ": " + d.Reason}}})
		s.auto.samples = nil
	}
}

// reportDecision records a decision to scale: the record's last decision
// (a dry run's cooldown counts from it), an audit entry, the metric and
// the log. A failed write is logged: the decision stands, and in mode on
// the migration's own record says it was taken.
func (s *streamActor) reportDecision(d reshard.AutoscaleDecision, mode reshard.AutoscaleMode, taken bool, now time.Time) {
	verb := "would " + string(d.Action)
	if taken {
		verb = string(d.Action)
	}
	reason := fmt.Sprintf("%s %d→%d (mode %s): %s", verb, d.From, d.To, mode, d.Reason)
	log := s.log().With(slog.String("action", string(d.Action)), slog.Int("from", d.From), slog.Int("to", d.To),
		slog.String("mode", string(mode)), slog.String("reason", d.Reason))
	log.Info("autoscale decision")
	if o, ok := s.env.obs.(AutoscaleObserver); ok {
		o.AutoscaleDecision(s.prefix, string(d.Action))
	}
	if next := s.rec; next.Autoscale != nil {
		rec := *next.Autoscale
		rec.LastDecision = &persistence.AutoscaleDecisionRecord{Action: string(d.Action), From: d.From, To: d.To, Reason: d.Reason, At: now, Taken: taken}
		next.Autoscale = &rec
		if err := s.saveRecord(next); err != nil {
			log.Warn("autoscale decision not recorded in the stream record", slog.Any("error", err))
		}
	}
	sctx, cancel := s.env.storeContext()
	defer cancel()
	to := d.To
	start := time.Now()
	_, err := s.env.store.AppendAudit(sctx, protocol.AuditEntry{
		Time: now, Operation: protocol.AuditAutoscale, StreamPrefix: s.prefix,
		Requested: protocol.AuditRequested{TargetShardCount: &to}, RequestedBy: AutoscaleRequester, Reason: reason,
		Principal: AutoscaleRequester, Roles: []string{}, AuthMethod: "none",
		Result: protocol.AuditResult{Outcome: protocol.AuditAccepted, Status: 200},
	})
	s.env.obs.StoreWrite("audit", time.Since(start), err)
	if err != nil {
		log.Warn("autoscale decision not audited", slog.Any("error", err))
	}
}

// resumeAutoscaled repeats, in mode on, the scale of a migration
// autoscaling started that is still PREPARING (its provisioning failed):
// the same request resumes it, as an operator would repeat it, so that it
// does not hold off every later decision.
func (s *streamActor) resumeAutoscaled(ctx actor.Context, p reshard.AutoscalePolicy) {
	m := s.activeMigration()
	if p.Mode != reshard.AutoscaleOn || m == nil || m.State != protocol.MigrationPreparing || m.RequestedBy != AutoscaleRequester || s.stepping {
		return
	}
	to := m.ToShardCount
	s.log().Info("autoscale resumes its migration", slog.String("migration", m.ReshardingID), slog.Int("to", to))
	s.migrate(ctx, migrationStep{msg: &scaleMsg{req: protocol.ScaleRequest{TargetShardCount: &to,
		RequestedBy: AutoscaleRequester, Reason: m.Reason}}})
}
