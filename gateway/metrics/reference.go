package metrics

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
)

// The reference design's metric families ([WithReferenceFamilies]): its
// dashboards query these names. Each carries the label coordinator; the
// per-group ones stream and group too.
const (
	RefUp                   = "redis_stream_coord_up"
	RefMembers              = "redis_stream_coord_members"
	RefGroupEpoch           = "redis_stream_coord_group_epoch"
	RefAssignmentEpoch      = "redis_stream_coord_assignment_epoch"
	RefMigrationActive      = "redis_stream_coord_migration_active"
	RefRevokePending        = "redis_stream_coord_revoke_pending"
	RefInvariantViolations  = "redis_stream_coord_invariant_violations"
	RefMemberActive         = "redis_stream_coord_member_active"
	RefMemberHeartbeatAge   = "redis_stream_coord_member_heartbeat_age_seconds"
	RefMemberLeaseRemaining = "redis_stream_coord_member_lease_remaining_seconds"
	RefMemberMaxConcurrency = "redis_stream_coord_member_runtime_max_concurrency"
	RefMemberActiveWorkers  = "redis_stream_coord_member_active_workers"
	RefMemberCurrentShards  = "redis_stream_coord_member_current_shards"
	RefMemberRevokingShards = "redis_stream_coord_member_revoking_shards"
	RefShardStreamLength    = "redis_stream_coord_shard_stream_length"
	RefShardPending         = "redis_stream_coord_shard_pending"
	RefShardLag             = "redis_stream_coord_shard_lag"
	RefShardMemory          = "redis_stream_coord_shard_memory_usage_bytes"
	RefHeartbeatTotal       = "redis_stream_coord_heartbeat_total"
	RefMemberExpiredTotal   = "redis_stream_coord_member_expired_total"
	RefRebalanceTotal       = "redis_stream_coord_rebalance_total"
	RefAPIRequestTotal      = "redis_stream_coord_api_request_total"
	RefAPIRequestDuration   = "redis_stream_coord_api_request_duration_seconds"
	RefAPIRequestMax        = "redis_stream_coord_api_request_duration_seconds_max"
)

// WithReferenceFamilies also exports the reference design's
// redis_stream_coord_* families, labelled coordinator=id, so that its
// dashboards fill. Off, they cost nothing: no series, and one nil check
// per request and heartbeat.
func WithReferenceFamilies(coordinator string) Option {
	return func(o *options) { o.reference, o.coordinator = true, coordinator }
}

// maxRefGroups bounds the (stream, group) label pairs the reference
// counters take from requests: past it a new pair is counted as
// stream="other", group="other", so that requests naming made-up groups
// cannot grow the series without bound.
const maxRefGroups = 10_000

// refMetrics are the reference design's families. The gauges are computed
// at scrape time from what the other collectors hold; the counters move
// with heartbeats, group steps and requests.
type refMetrics struct {
	m           *Metrics
	coordinator string

	heartbeats, expired, rebalances *prometheus.CounterVec
	apiTotal                        *prometheus.CounterVec
	apiDuration                     *prometheus.SummaryVec
	apiMax                          *prometheus.Desc
	api                             sync.Map // apiKey → *apiSeries

	groups    sync.Map // [2]string → struct{}
	groupsLen atomic.Int64

	up, members, epoch, assignmentEpoch, migration, revoke, violations *prometheus.Desc
	memberActive, heartbeatAge, leaseRemaining, maxConc, workers       *prometheus.Desc
	current, revoking, length, pending, lag, memory                    *prometheus.Desc
}

type apiKey struct{ method, route, status, outcome, stream, group string }

type apiSeries struct {
	key      apiKey
	count    prometheus.Counter
	duration prometheus.Observer
	max      windowMax
}

func newRefMetrics(m *Metrics, coordinator string) *refMetrics {
	constLabels := prometheus.Labels{"coordinator": coordinator}
	groupLabels := []string{"stream", "group"}
	memberLabels := []string{"stream", "group", "member"}
	shardLabels := []string{"stream", "group", "shard", "stream_key"}
	desc := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, constLabels)
	}
	apiLabels := []string{"method", "route", "status", "outcome", "stream", "group"}
	r := &refMetrics{
		m: m, coordinator: coordinator,
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RefHeartbeatTotal, ConstLabels: constLabels,
			Help: "Heartbeats answered, by group and response status."}, []string{"stream", "group", "status"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RefMemberExpiredTotal, ConstLabels: constLabels,
			Help: "Members expired after their lease passed, by group."}, groupLabels),
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RefRebalanceTotal, ConstLabels: constLabels,
			Help: "Target assignment changes, by group."}, []string{"stream", "group", "reason"}),
		apiTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RefAPIRequestTotal, ConstLabels: constLabels,
			Help: "HTTP API requests answered, by method, route template, status, outcome and group."}, apiLabels),
		apiDuration: prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: RefAPIRequestDuration, ConstLabels: constLabels,
			Help:       "HTTP API request latency over the last two minutes, by method, route template, status, outcome and group.",
			Objectives: map[float64]float64{0.5: 0.05, 0.95: 0.01, 0.99: 0.001}, MaxAge: 2 * time.Minute, AgeBuckets: 3}, apiLabels),
		apiMax: desc(RefAPIRequestMax, "Longest HTTP API request of the last two minutes.", apiLabels),

		up:              desc(RefUp, "1 while the coordinator serves and Redis (when configured) answered the last collection, else 0.", nil),
		members:         desc(RefMembers, "Members of the group: state=total (every member kept), active (ACTIVE or STARTING), expired.", []string{"stream", "group", "state"}),
		epoch:           desc(RefGroupEpoch, "Group epoch.", groupLabels),
		assignmentEpoch: desc(RefAssignmentEpoch, "Assignment epoch.", groupLabels),
		migration:       desc(RefMigrationActive, "1 while the group's stream has a migration not yet DEPRECATED or ROLLED_BACK.", groupLabels),
		revoke:          desc(RefRevokePending, "Shards members still report giving up.", groupLabels),
		violations:      desc(RefInvariantViolations, "Violated assignment invariants (anything but 0 is a bug).", groupLabels),
		memberActive:    desc(RefMemberActive, "1 while the member is ACTIVE or STARTING.", memberLabels),
		heartbeatAge:    desc(RefMemberHeartbeatAge, "Seconds since the member's last heartbeat, at scrape time.", memberLabels),
		leaseRemaining:  desc(RefMemberLeaseRemaining, "Seconds until the member's lease lapses, at scrape time (0 once it has).", memberLabels),
		maxConc:         desc(RefMemberMaxConcurrency, "Workers the member last reported it runs at most.", memberLabels),
		workers:         desc(RefMemberActiveWorkers, "Workers the member last reported busy.", memberLabels),
		current:         desc(RefMemberCurrentShards, "Shards the member reported reading, accepted.", memberLabels),
		revoking:        desc(RefMemberRevokingShards, "Shards the member reported giving up.", memberLabels),
		length:          desc(RefShardStreamLength, "Entries in the shard stream (XLEN), read by the background collection.", shardLabels),
		pending:         desc(RefShardPending, "Entries delivered to the group on the shard and not acknowledged.", shardLabels),
		lag:             desc(RefShardLag, "Entries of the shard the group has not read yet; absent when Redis cannot tell.", shardLabels),
		memory:          desc(RefShardMemory, "Bytes Redis reports the shard stream's key takes (MEMORY USAGE, sampled).", shardLabels),
	}
	return r
}

// register adds r's families to reg and starts each group-less counter
// series the dashboards read.
func (r *refMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(r.heartbeats, r.expired, r.rebalances, r.apiTotal, r.apiDuration, r)
}

// groupLabels bounds the (stream, group) pairs requests may add.
func (r *refMetrics) groupLabels(stream, group string) (string, string) {
	if stream == "" {
		stream = "none"
	}
	if group == "" {
		group = "none"
	}
	k := [2]string{stream, group}
	if _, ok := r.groups.Load(k); ok {
		return stream, group
	}
	if r.groupsLen.Load() >= maxRefGroups {
		return "other", "other"
	}
	if _, loaded := r.groups.LoadOrStore(k, struct{}{}); !loaded {
		r.groupsLen.Add(1)
	}
	return stream, group
}

// GroupHeartbeat counts one answered heartbeat of a group in the
// reference design's redis_stream_coord_heartbeat_total; nothing without
// [WithReferenceFamilies].
func (m *Metrics) GroupHeartbeat(prefix, group string, status protocol.Status) {
	r := m.ref
	if r == nil {
		return
	}
	stream, g := r.groupLabels(prefix, group)
	r.heartbeats.WithLabelValues(stream, g, string(status)).Inc()
}

// refGroupStep counts a step's expirations and rebalances.
func (r *refMetrics) refGroupStep(prefix, group string, step actors.GroupStep) {
	if n := len(step.Events.Expired); n > 0 {
		r.expired.WithLabelValues(prefix, group).Add(float64(n))
	}
	if step.Events.Rebalanced {
		r.rebalances.WithLabelValues(prefix, group, "TARGET_CHANGED").Inc()
	}
}

// apiRequest records one answered request as the reference design's API
// metrics do.
func (r *refMetrics) apiRequest(c *gin.Context, took time.Duration) {
	status := c.Writer.Status()
	outcome := "SUCCESS"
	switch {
	case status >= 500:
		outcome = "SERVER_ERROR"
	case status >= 400:
		outcome = "CLIENT_ERROR"
	}
	stream, group := c.Param("prefix"), c.Param("group")
	if stream == "" {
		stream, group = c.Query("streamPrefix"), c.Query("consumerGroup")
	}
	if status == 404 || len(stream) > protocol.MaxTextLength || len(group) > protocol.MaxTextLength {
		stream, group = "", ""
	}
	stream, group = r.groupLabels(stream, group)
	k := apiKey{methodLabel(c.Request.Method), springRoute(c.FullPath()), strconv.Itoa(status), outcome, stream, group}
	s, ok := r.api.Load(k)
	if !ok {
		s, _ = r.api.LoadOrStore(k, &apiSeries{key: k,
			count:    r.apiTotal.WithLabelValues(k.method, k.route, k.status, k.outcome, k.stream, k.group),
			duration: r.apiDuration.WithLabelValues(k.method, k.route, k.status, k.outcome, k.stream, k.group)})
	}
	series := s.(*apiSeries)
	series.count.Inc()
	series.duration.Observe(took.Seconds())
	series.max.observe(time.Now(), took.Seconds())
}

// springRoute writes gin's route template the way the reference design's
// routes read ("{streamPrefix}" for ":prefix"); "unmatched" for none.
func springRoute(path string) string {
	if path == "" {
		return RouteUnmatched
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if len(p) > 1 && (p[0] == ':' || p[0] == '*') {
			name := p[1:]
			switch name {
			case "prefix":
				name = "streamPrefix"
			case "group":
				name = "consumerGroup"
			case "member":
				name = "memberId"
			case "shard":
				name = "shardIndex"
			case "id":
				name = "reshardingId"
			}
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

// windowMax is the largest value observed in the current two-minute
// window or the one before it, as the reference design's _max gauge.
type windowMax struct {
	mu         sync.Mutex
	start      time.Time
	cur, prior float64
}

const maxWindow = 2 * time.Minute

func (w *windowMax) observe(now time.Time, v float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	w.cur = max(w.cur, v)
}

func (w *windowMax) value(now time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll(now)
	return max(w.cur, w.prior)
}

func (w *windowMax) roll(now time.Time) {
	switch {
	case w.start.IsZero():
		w.start = now
	case now.Sub(w.start) >= 2*maxWindow:
		w.start, w.cur, w.prior = now, 0, 0
	case now.Sub(w.start) >= maxWindow:
		w.start, w.prior, w.cur = w.start.Add(maxWindow), w.cur, 0
	}
}

// Describe implements prometheus.Collector.
func (r *refMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{r.apiMax, r.up, r.members, r.epoch, r.assignmentEpoch, r.migration, r.revoke, r.violations,
		r.memberActive, r.heartbeatAge, r.leaseRemaining, r.maxConc, r.workers, r.current, r.revoking,
		r.length, r.pending, r.lag, r.memory} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the gauges, computed from what
// the state, live and member collectors hold now.
func (r *refMetrics) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	r.api.Range(func(_, v any) bool {
		s := v.(*apiSeries)
		k := s.key
		gauge(r.apiMax, s.max.value(now), k.method, k.route, k.status, k.outcome, k.stream, k.group)
		return true
	})
	r.collectGroups(gauge)
	r.collectMembers(gauge, now)
	r.collectShards(gauge)
}

func (r *refMetrics) collectGroups(gauge func(*prometheus.Desc, float64, ...string)) {
	st := r.m.state
	st.mu.Lock()
	defer st.mu.Unlock()
	for k, rep := range st.groupState {
		s := rep.state
		total := 0
		for _, n := range s.MembersByState {
			total += n
		}
		active := s.MembersByState[protocol.MemberActive] + s.MembersByState[protocol.MemberStarting]
		gauge(r.members, float64(total), k[0], k[1], "total")
		gauge(r.members, float64(active), k[0], k[1], "active")
		gauge(r.members, float64(s.MembersByState[protocol.MemberExpired]), k[0], k[1], "expired")
		gauge(r.epoch, float64(s.GroupEpoch), k[0], k[1])
		gauge(r.assignmentEpoch, float64(s.AssignmentEpoch), k[0], k[1])
		gauge(r.revoke, float64(s.PendingRevocations), k[0], k[1])
		gauge(r.violations, float64(s.InvariantViolations), k[0], k[1])
		migrating := 0.0
		for state, n := range st.streamMigs[k[0]] {
			if n > 0 && state != protocol.MigrationDeprecated && state != protocol.MigrationRolledBack {
				migrating = 1
			}
		}
		gauge(r.migration, migrating, k[0], k[1])
	}
}

func (r *refMetrics) collectMembers(gauge func(*prometheus.Desc, float64, ...string), now time.Time) {
	src := r.m.members.src.Load()
	if src == nil {
		return
	}
	left := r.m.members.maxMembers
	for _, g := range (*src).LiveGroups() {
		for _, mb := range g.Members {
			if left <= 0 {
				return // the cap of the per-member gauges holds here too
			}
			left--
			labels := []string{g.Stream, g.Group, mb.ID}
			active := 0.0
			if mb.State == protocol.MemberActive || mb.State == protocol.MemberStarting {
				active = 1
			}
			gauge(r.memberActive, active, labels...)
			if !mb.LastHeartbeat.IsZero() {
				gauge(r.heartbeatAge, max(0, now.Sub(mb.LastHeartbeat).Seconds()), labels...)
			}
			if !mb.LeaseExpires.IsZero() {
				gauge(r.leaseRemaining, max(0, mb.LeaseExpires.Sub(now).Seconds()), labels...)
			}
			gauge(r.maxConc, float64(mb.MaxConcurrency), labels...)
			gauge(r.workers, float64(max(0, mb.MaxConcurrency-mb.AvailableConcurrency)), labels...)
			gauge(r.current, float64(len(mb.Current)), labels...)
			gauge(r.revoking, float64(len(mb.Revoking)), labels...)
		}
	}
}

func (r *refMetrics) collectShards(gauge func(*prometheus.Desc, float64, ...string)) {
	l := r.m.live
	l.mu.Lock()
	defer l.mu.Unlock()
	up := 1.0
	if l.redis != nil && !*l.redis {
		up = 0
	}
	gauge(r.up, up)
	memory := make(map[[2]string]int64, len(l.memories))
	for _, mem := range l.memories {
		memory[[2]string{mem.Stream, strconv.Itoa(mem.Shard)}] = mem.Bytes
	}
	for _, s := range l.shards {
		shard := strconv.Itoa(s.Shard)
		labels := []string{s.Stream, s.Group, shard, protocol.StreamKey(s.Stream, s.Shard)}
		gauge(r.length, float64(s.Length), labels...)
		if s.Pending != nil {
			gauge(r.pending, float64(*s.Pending), labels...)
		}
		if s.Lag != nil {
			gauge(r.lag, float64(*s.Lag), labels...)
		}
		if b, ok := memory[[2]string{s.Stream, shard}]; ok {
			gauge(r.memory, float64(b), labels...)
		}
	}
}

// ShardMemoryOf returns, by shard index, the bytes the background
// collection last read each shard key of stream to take (MEMORY USAGE);
// a shard not read has no entry.
func (m *Metrics) ShardMemoryOf(stream string) map[int]int64 {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	out := map[int]int64{}
	for _, mem := range m.live.memories {
		if mem.Stream == stream {
			out[mem.Shard] = mem.Bytes
		}
	}
	return out
}
