package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
)

// Metrics holds every metric of one coordinator in its own registry. It is
// safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	heartbeats *prometheus.CounterVec
	// heartbeatLatency is rscoord_heartbeat_duration_seconds by its held
	// label: the two series, looked up once rather than per heartbeat.
	heartbeatLatency   [2]prometheus.Observer // [0] held="false", [1] held="true"
	groupSteps         *prometheus.CounterVec
	joins              prometheus.Counter
	leaves             prometheus.Counter
	expirations        prometheus.Counter
	fences             prometheus.Counter
	pruned             prometheus.Counter
	duplicateMembers   prometheus.Counter
	memberLimit        prometheus.Counter
	staleIncarnations  prometheus.Counter
	releases           prometheus.Counter
	rebalances         prometheus.Counter
	rebalanceDuration  prometheus.Histogram
	storeWriteDuration *prometheus.HistogramVec
	storeWriteErrors   *prometheus.CounterVec
	routing            *prometheus.CounterVec
	adminMutations     *prometheus.CounterVec
	adminFailures      *prometheus.CounterVec
	rateLimited        *prometheus.CounterVec
	authRefused        *prometheus.CounterVec

	state *stateCollector
	live  *liveCollector
	// held reads the heartbeats held right now (SetHeldSource); nil: 0.
	held atomic.Pointer[func() int64]
}

var _ actors.Observer = (*Metrics)(nil)

// New returns metrics registered in a new registry, with the Go runtime
// and process collectors. Every labelled counter starts at 0 for each
// label value it can take, so that rate() and increase() see the first
// event.
func New(opts ...Option) *Metrics {
	o := options{maxMembers: DefaultMaxMembers}
	for _, opt := range opts {
		opt(&o)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), state: newStateCollector(), live: newLiveCollector(o)}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	latency := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	m.heartbeats = counterVec("rscoord_heartbeats_total", "Heartbeats answered, by response status.", "status")
	heartbeatLatencies := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rscoord_heartbeat_duration_seconds", Buckets: latency,
		Help: `Time to answer a heartbeat, from decoded request to response. held="true": the request asked to be held (waitMs) and could be, so its time includes the wait; held="false": answered at once, the coordinator's own speed.`},
		[]string{"held"})
	m.heartbeatLatency = [2]prometheus.Observer{
		heartbeatLatencies.WithLabelValues("false"), heartbeatLatencies.WithLabelValues("true")}
	m.groupSteps = counterVec("rscoord_group_steps_total", "Steps of group state machines, by kind and whether they were persisted.", "kind", "persisted")
	m.joins = counter("rscoord_member_joins_total", "Members that joined or rejoined.")
	m.leaves = counter("rscoord_member_leaves_total", "Members that left gracefully.")
	m.expirations = counter("rscoord_member_expirations_total", "Members expired after their lease passed.")
	m.fences = counter("rscoord_member_fences_total", "Members fenced (stale epoch, unauthorized shards, rebalance timeout).")
	m.pruned = counter("rscoord_member_prunes_total", "Terminal members removed after the retention.")
	m.duplicateMembers = counter("rscoord_duplicate_member_heartbeats_total", "Join heartbeats of another incarnation of a member that still holds its id (answered RETRY).")
	m.memberLimit = counter("rscoord_member_limit_refusals_total", "Joins refused because their group holds --max-group-members members (answered RETRY with MEMBER_LIMIT_REACHED).")
	m.staleIncarnations = counter("rscoord_stale_incarnation_heartbeats_total", "Heartbeats of another incarnation than a member's stored one (fenced alone; the member is untouched).")
	m.releases = counter("rscoord_member_releases_total", "Members no longer live whose shards were freed when the lease of their last readable answer lapsed.")
	m.rebalances = counter("rscoord_rebalances_total", "Target assignment changes.")
	m.rebalanceDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "rscoord_rebalance_duration_seconds", Help: "Time from a target change until the group is STABLE or EMPTY again.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}})
	m.storeWriteDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rscoord_store_write_duration_seconds", Help: "Synced store writes, by record kind.", Buckets: latency}, []string{"kind"})
	m.storeWriteErrors = counterVec("rscoord_store_write_errors_total", "Failed store writes, by record kind.", "kind")
	m.routing = counterVec("rscoord_producer_routing_requests_total", "Producer routing requests, by result (OK or error code).", "result")
	m.adminMutations = counterVec("rscoord_admin_mutations_total", "Admin mutations, by operation and outcome (ACCEPTED or REFUSED).", "operation", "outcome")
	m.adminFailures = counterVec("rscoord_admin_mutation_failures_total", "Refused admin mutations, by operation and error code.", "operation", "code")
	m.rateLimited = counterVec("rscoord_rate_limit_refusals_total", "Requests refused with 429, by limiter (admin, login, logout, body_memory).", "limiter")
	m.authRefused = counterVec("rscoord_auth_refusals_total", "Requests refused for credentials, by status (401, 403).", "status")
	// Read when scraped, so that holding and answering a heartbeat costs
	// nothing more.
	heldNow := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: HeldHeartbeats,
		Help: "Heartbeats held right now (waitMs), waiting for news or the end of their wait; bounded by --max-held-heartbeats."},
		func() float64 {
			if f := m.held.Load(); f != nil {
				return float64((*f)())
			}
			return 0
		})
	m.reg.MustRegister(heartbeatLatencies, m.rebalanceDuration, m.storeWriteDuration, m.state, m.live, heldNow,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.initLabels()
	return m
}

// SetHeldSource makes rscoord_held_heartbeats read f (the coordinator's
// count) when scraped.
func (m *Metrics) SetHeldSource(f func() int64) { m.held.Store(&f) }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry every metric lives in, for tests and for
// callers adding their own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Heartbeat counts one answered heartbeat; held says that it asked to be
// held (waitMs) and could be, so that took includes the wait.
func (m *Metrics) Heartbeat(status protocol.Status, held bool, took time.Duration) {
	m.heartbeats.WithLabelValues(string(status)).Inc()
	i := 0
	if held {
		i = 1
	}
	m.heartbeatLatency[i].Observe(took.Seconds())
}

// ProducerRouting counts one routing request; code is "" when it
// succeeded.
func (m *Metrics) ProducerRouting(code protocol.ErrorCode) {
	result := "OK"
	if code != "" {
		result = string(code)
	}
	m.routing.WithLabelValues(result).Inc()
}

// AdminMutation counts one admin mutation answered with status and, when
// refused, code.
func (m *Metrics) AdminMutation(op protocol.AuditOperation, status int, code protocol.ErrorCode) {
	if status >= 200 && status < 300 {
		m.adminMutations.WithLabelValues(string(op), protocol.AuditAccepted).Inc()
		return
	}
	m.adminMutations.WithLabelValues(string(op), protocol.AuditRefused).Inc()
	m.adminFailures.WithLabelValues(string(op), string(code)).Inc()
}

// RateLimited counts one 429 of limiter: one of [RateLimiters].
func (m *Metrics) RateLimited(limiter string) { m.rateLimited.WithLabelValues(limiter).Inc() }

// AuthRefused counts one 401 or 403.
func (m *Metrics) AuthRefused(status int) { m.authRefused.WithLabelValues(strconv.Itoa(status)).Inc() }

// GroupStep implements [actors.Observer].
func (m *Metrics) GroupStep(_, _ string, step actors.GroupStep) {
	m.groupSteps.WithLabelValues(step.Kind, strconv.FormatBool(step.Persisted)).Inc()
	ev := step.Events
	m.joins.Add(float64(len(ev.Joined)))
	m.leaves.Add(float64(len(ev.Left)))
	m.expirations.Add(float64(len(ev.Expired)))
	m.fences.Add(float64(len(ev.Fenced)))
	m.pruned.Add(float64(len(ev.Pruned)))
	if ev.DuplicateMember {
		m.duplicateMembers.Inc()
	}
	if ev.MemberLimitReached {
		m.memberLimit.Inc()
	}
	if ev.StaleIncarnation {
		m.staleIncarnations.Inc()
	}
	m.releases.Add(float64(len(ev.Released)))
	if ev.Rebalanced {
		m.rebalances.Inc()
	}
}

// GroupState implements [actors.Observer].
func (m *Metrics) GroupState(prefix, group string, s actors.GroupState) {
	m.state.setGroup(prefix, group, s)
}

// GroupRemoved implements [actors.Observer].
func (m *Metrics) GroupRemoved(prefix, group string) { m.state.removeGroup(prefix, group) }

// RebalanceDone implements [actors.Observer].
func (m *Metrics) RebalanceDone(_, _ string, took time.Duration) {
	m.rebalanceDuration.Observe(took.Seconds())
}

// StoreWrite implements [actors.Observer].
func (m *Metrics) StoreWrite(kind string, took time.Duration, err error) {
	m.storeWriteDuration.WithLabelValues(kind).Observe(took.Seconds())
	if err != nil {
		m.storeWriteErrors.WithLabelValues(kind).Inc()
	}
}

// StreamMigrations implements [actors.Observer].
func (m *Metrics) StreamMigrations(prefix string, byState map[protocol.MigrationState]int) {
	m.state.setMigrations(prefix, byState)
}

// StreamRemoved implements [actors.Observer].
func (m *Metrics) StreamRemoved(prefix string) { m.state.removeStream(prefix) }

// stateCollector exports the latest state every group and stream
// reported, computed at scrape time.
type stateCollector struct {
	members, groups, epoch, assignmentEpoch, pending, violations, migrations, stateInfo *prometheus.Desc
	streamMigrations                                                                    *prometheus.Desc

	mu         sync.Mutex
	groupState map[[2]string]actors.GroupState
	streamMigs map[string]map[protocol.MigrationState]int
}

func newStateCollector() *stateCollector {
	return &stateCollector{
		members:         prometheus.NewDesc("rscoord_members", "Members of every group, by state.", []string{"state"}, nil),
		groups:          prometheus.NewDesc("rscoord_groups", "Groups, by state.", []string{"state"}, nil),
		epoch:           prometheus.NewDesc("rscoord_group_epoch", "Group epoch.", []string{"stream", "group"}, nil),
		assignmentEpoch: prometheus.NewDesc("rscoord_group_assignment_epoch", "Assignment epoch.", []string{"stream", "group"}, nil),
		pending:         prometheus.NewDesc("rscoord_group_pending_revocations", "Shards members still report as revoking.", []string{"stream", "group"}, nil),
		violations:      prometheus.NewDesc("rscoord_group_invariant_violations", "Violated assignment invariants (anything but 0 is a bug).", []string{"stream", "group"}, nil),
		migrations:      prometheus.NewDesc("rscoord_migrations", "Migrations of every stream, by state.", []string{"state"}, nil),
		streamMigrations: prometheus.NewDesc(StreamMigrations, "Migrations of one stream, by state (a stream has at most one not yet DEPRECATED or ROLLED_BACK).",
			[]string{"stream", "state"}, nil),
		stateInfo:  prometheus.NewDesc(GroupStateInfo, "1 for the group's current state, 0 for the others.", []string{"stream", "group", "state"}, nil),
		groupState: map[[2]string]actors.GroupState{},
		streamMigs: map[string]map[protocol.MigrationState]int{},
	}
}

func (c *stateCollector) setGroup(prefix, group string, s actors.GroupState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groupState[[2]string{prefix, group}] = s
}

func (c *stateCollector) removeGroup(prefix, group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.groupState, [2]string{prefix, group})
}

func (c *stateCollector) removeStream(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streamMigs, prefix)
}

func (c *stateCollector) setMigrations(prefix string, byState map[protocol.MigrationState]int) {
	cp := make(map[protocol.MigrationState]int, len(byState))
	for k, v := range byState {
		cp[k] = v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streamMigs[prefix] = cp
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.members, c.groups, c.epoch, c.assignmentEpoch, c.pending, c.violations, c.migrations, c.stateInfo, c.streamMigrations} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Every state is exported, at 0
// when no group or migration is in it, so that dashboards see the series.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	members := map[protocol.MemberState]int{}
	groups := map[protocol.GroupState]int{}
	for k, s := range c.groupState {
		groups[s.State]++
		for st, n := range s.MembersByState {
			members[st] += n
		}
		ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(s.GroupEpoch), k[0], k[1])
		ch <- prometheus.MustNewConstMetric(c.assignmentEpoch, prometheus.GaugeValue, float64(s.AssignmentEpoch), k[0], k[1])
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.PendingRevocations), k[0], k[1])
		ch <- prometheus.MustNewConstMetric(c.violations, prometheus.GaugeValue, float64(s.InvariantViolations), k[0], k[1])
		for _, st := range groupStates() {
			v := 0.0
			if s.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.stateInfo, prometheus.GaugeValue, v, k[0], k[1], string(st))
		}
	}
	for _, st := range []protocol.MemberState{protocol.MemberStarting, protocol.MemberActive, protocol.MemberLeaving, protocol.MemberExpired, protocol.MemberFenced} {
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(members[st]), string(st))
	}
	for _, st := range groupStates() {
		ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(groups[st]), string(st))
	}
	migs := map[protocol.MigrationState]int{}
	states := migrationStates()
	for prefix, byState := range c.streamMigs {
		for _, st := range states {
			migs[st] += byState[st]
			ch <- prometheus.MustNewConstMetric(c.streamMigrations, prometheus.GaugeValue, float64(byState[st]), prefix, string(st))
		}
	}
	for _, st := range states {
		ch <- prometheus.MustNewConstMetric(c.migrations, prometheus.GaugeValue, float64(migs[st]), string(st))
	}
}
