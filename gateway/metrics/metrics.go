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
	// heartbeatStatus holds heartbeats' series by status, bound once:
	// looking a child up by its label value hashed it per heartbeat.
	heartbeatStatus map[protocol.Status]prometheus.Counter
	// heartbeatLatency is rscoord_heartbeat_duration_seconds by its held
	// label: the two series, looked up once rather than per heartbeat.
	heartbeatLatency [2]prometheus.Observer // [0] held="false", [1] held="true"
	groupSteps       *prometheus.CounterVec
	// stepSeries holds groupSteps' series by kind, bound once like
	// heartbeatStatus: every heartbeat is a step.
	stepSeries         map[string][2]prometheus.Counter // [0] persisted="false", [1] persisted="true"
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
	autoscale          *prometheus.CounterVec

	state   *stateCollector
	live    *liveCollector
	members *memberCollector
	caps    *capsCollector
	http    *httpMetrics
	// ref is nil unless WithReferenceFamilies asked for the reference
	// design's families.
	ref *refMetrics
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
	m := &Metrics{reg: prometheus.NewRegistry(), state: newStateCollector(), live: newLiveCollector(o),
		members: newMemberCollector(o)}
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
	m.autoscale = counterVec("rscoord_autoscale_decisions_total", autoscaleHelp, "stream", "action")
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
	m.caps = newCapsCollector()
	m.http = newHTTPMetrics(m.reg)
	m.reg.MustRegister(heartbeatLatencies, m.rebalanceDuration, m.storeWriteDuration, m.state, m.live, m.members, m.caps,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.initLabels()
	if o.reference {
		m.ref = newRefMetrics(m, o.coordinator)
		m.ref.register(m.reg)
	}
	return m
}

// HeldSource is what rscoord_held_heartbeats and its limit read when
// scraped: the coordinator of package actors.
type HeldSource interface {
	// HeldHeartbeats is how many heartbeats are held right now.
	HeldHeartbeats() int64
	// MaxHeldHeartbeats is the most that may be held at once.
	MaxHeldHeartbeats() int
}

// SetHeldSource makes rscoord_held_heartbeats and
// rscoord_held_heartbeats_limit read src when scraped. Before it both are
// 0.
func (m *Metrics) SetHeldSource(src HeldSource) { m.caps.held.Store(&src) }

// ConnectionSource is what the HTTP connection gauges read when scraped:
// the server's HTTP server (*gateway.HTTPServer).
type ConnectionSource interface {
	// OpenConnections is how many connections are open.
	OpenConnections() int
	// MaxConnections is the connection cap.
	MaxConnections() int
	// HeldConnections is how many connections held heartbeats keep busy.
	HeldConnections() int
	// MaxHeldConnections is the most they may keep busy.
	MaxHeldConnections() int
}

// SetConnectionSource makes the rscoord_http_connections and
// rscoord_http_held_connections gauges, and their limits, read src when
// scraped; they are absent before.
func (m *Metrics) SetConnectionSource(src ConnectionSource) { m.caps.conns.Store(&src) }

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
	if c, ok := m.heartbeatStatus[status]; ok {
		c.Inc()
	} else {
		m.heartbeats.WithLabelValues(string(status)).Inc()
	}
	m.heartbeatLatency[boolIndex(held)].Observe(took.Seconds())
}

// boolIndex is the index of b's series in a pair bound by a true/false
// label: 0 for false, 1 for true.
func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// addCount adds n to c, skipping the atomic update when there is nothing
// to add (the common case: a step of a steady heartbeat).
func addCount(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
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
func (m *Metrics) GroupStep(prefix, group string, step actors.GroupStep) {
	if m.ref != nil {
		m.ref.refGroupStep(prefix, group, step)
	}
	if series, ok := m.stepSeries[step.Kind]; ok {
		series[boolIndex(step.Persisted)].Inc()
	} else {
		m.groupSteps.WithLabelValues(step.Kind, strconv.FormatBool(step.Persisted)).Inc()
	}
	ev := step.Events
	addCount(m.joins, len(ev.Joined))
	addCount(m.leaves, len(ev.Left))
	addCount(m.expirations, len(ev.Expired))
	addCount(m.fences, len(ev.Fenced))
	addCount(m.pruned, len(ev.Pruned))
	if ev.DuplicateMember {
		m.duplicateMembers.Inc()
	}
	if ev.MemberLimitReached {
		m.memberLimit.Inc()
	}
	if ev.StaleIncarnation {
		m.staleIncarnations.Inc()
	}
	addCount(m.releases, len(ev.Released))
	if ev.Rebalanced {
		m.rebalances.Inc()
	}
}

// GroupState implements [actors.Observer].
func (m *Metrics) GroupState(prefix, group string, incarnation uint64, s actors.GroupState) {
	m.state.setGroup(prefix, group, incarnation, s)
}

// GroupRemoved implements [actors.Observer].
func (m *Metrics) GroupRemoved(prefix, group string, incarnation uint64) {
	m.state.removeGroup(prefix, group, incarnation)
}

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
	groupState map[[2]string]groupReport
	streamMigs map[string]map[protocol.MigrationState]int
}

// groupReport is the last state a group reported and the incarnation of
// the actor that reported it.
type groupReport struct {
	incarnation uint64
	state       actors.GroupState
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
		groupState: map[[2]string]groupReport{},
		streamMigs: map[string]map[protocol.MigrationState]int{},
	}
}

// setGroup keeps s unless a newer actor of the group reported already.
func (c *stateCollector) setGroup(prefix, group string, incarnation uint64, s actors.GroupState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]string{prefix, group}
	if cur, ok := c.groupState[k]; ok && cur.incarnation > incarnation {
		return
	}
	c.groupState[k] = groupReport{incarnation: incarnation, state: s}
}

// removeGroup forgets the group's state unless a newer actor than the
// removing one reported it: a group deleted and created again has a new
// actor, whose first state may come before the old actor's removal.
func (c *stateCollector) removeGroup(prefix, group string, incarnation uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]string{prefix, group}
	if cur, ok := c.groupState[k]; ok && cur.incarnation <= incarnation {
		delete(c.groupState, k)
	}
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
	for k, r := range c.groupState {
		s := r.state
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

// capsCollector exports the bounded resources beside their caps, read at
// scrape time so that holding a heartbeat or a connection costs nothing
// more: an alert on usage against the cap fires before requests start
// being answered at once or waiting for a connection.
type capsCollector struct {
	held  atomic.Pointer[HeldSource]
	conns atomic.Pointer[ConnectionSource]

	heldNow, heldLimit   *prometheus.Desc
	connsNow, connsLimit *prometheus.Desc
	pinnedNow, pinnedCap *prometheus.Desc
}

func newCapsCollector() *capsCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &capsCollector{
		heldNow:    desc(HeldHeartbeats, "Heartbeats held right now (waitMs), waiting for news or the end of their wait; bounded by rscoord_held_heartbeats_limit."),
		heldLimit:  desc(HeldHeartbeatsLimit, "Most heartbeats held at once (--max-held-heartbeats as applied); past it heartbeats are answered at once."),
		connsNow:   desc(HTTPConnections, "HTTP connections open right now; bounded by rscoord_http_connections_limit."),
		connsLimit: desc(HTTPConnectionsLimit, "Most HTTP connections open at once (--http-max-connections, lowered to fit the file descriptor limit); at it the connection idle longest is closed, and while every one is busy new ones wait."),
		pinnedNow:  desc(HTTPHeldConnections, "HTTP connections held heartbeats keep busy right now; bounded by rscoord_http_held_connections_limit."),
		pinnedCap:  desc(HTTPHeldConnectionsLimit, "Most HTTP connections held heartbeats may keep busy (three quarters of the connection cap); past it heartbeats are answered at once."),
	}
}

// Describe implements prometheus.Collector.
func (c *capsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.heldNow, c.heldLimit, c.connsNow, c.connsLimit, c.pinnedNow, c.pinnedCap} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *capsCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	var held, heldMax float64
	if src := c.held.Load(); src != nil {
		held, heldMax = float64((*src).HeldHeartbeats()), float64((*src).MaxHeldHeartbeats())
	}
	gauge(c.heldNow, held)
	gauge(c.heldLimit, heldMax)
	if src := c.conns.Load(); src != nil {
		s := *src
		gauge(c.connsNow, float64(s.OpenConnections()))
		gauge(c.connsLimit, float64(s.MaxConnections()))
		gauge(c.pinnedNow, float64(s.HeldConnections()))
		gauge(c.pinnedCap, float64(s.MaxHeldConnections()))
	}
}
