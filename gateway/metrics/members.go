package metrics

import (
	"cmp"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/actors"
)

// LiveSource is what the per-member and ownership gauges read when
// scraped: the coordinator of package actors, whose group actors
// publish their members after every step. Reading it must not wait on any
// actor.
type LiveSource interface {
	LiveGroups() []actors.LiveGroup
}

// SetLiveSource makes the per-member gauges (heartbeat age, lease
// remaining, shard counts, capacity), rscoord_shard_owner and
// rscoord_group_unowned_shards read src when scraped. Before it they are
// absent. gateway.New calls it with the coordinator it serves.
func (m *Metrics) SetLiveSource(src LiveSource) { m.members.src.Store(&src) }

// memberCollector computes the per-member and per-shard ownership gauges
// at scrape time from what the group actors last decided, so that a
// member's heartbeat age is as old as its last heartbeat, never as old as
// a background round.
type memberCollector struct {
	src        atomic.Pointer[LiveSource]
	maxMembers int
	now        func() time.Time

	heartbeatAge, leaseRemaining *prometheus.Desc
	current, revoking            *prometheus.Desc
	maxConc, availConc           *prometheus.Desc
	capped, owner, unowned       *prometheus.Desc
}

func newMemberCollector(o options) *memberCollector {
	memberLabels := []string{"stream", "group", "member", "state"}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, memberLabels, nil) }
	return &memberCollector{
		maxMembers:     o.maxMembers,
		now:            time.Now,
		heartbeatAge:   desc(MemberHeartbeatAgeSeconds, "Seconds since the member's last heartbeat, at scrape time; members stay (with their state) until pruned."),
		leaseRemaining: desc(MemberLeaseRemainingSeconds, "Seconds until the member's lease lapses, at scrape time (negative once it has)."),
		current:        desc(MemberCurrentShards, "Shards the member reported reading, accepted."),
		revoking:       desc(MemberRevokingShards, "Shards the member reported giving up and not yet released."),
		maxConc:        desc(MemberMaxConcurrency, "Workers the member last reported it runs at most (runtimeMaxConcurrency)."),
		availConc:      desc(MemberAvailableConcurrency, "Workers the member last reported free (availableConcurrency)."),
		capped:         prometheus.NewDesc(MemberSeriesCapped, "Members left out of the per-member gauges at this scrape by --metrics-max-members.", nil, nil),
		owner: prometheus.NewDesc(ShardOwner, "1 for each member the group accepted as reading the shard (its current assignment); a shard no member reads has no series.",
			[]string{"stream", "group", "shard", "member"}, nil),
		unowned: prometheus.NewDesc(GroupUnownedShards, "Readable shards of the group that no member reads or is giving up.",
			[]string{"stream", "group"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *memberCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.heartbeatAge, c.leaseRemaining, c.current, c.revoking, c.maxConc, c.availConc,
		c.capped, c.owner, c.unowned} {
		ch <- d
	}
}

// groupMember is one member with the group it belongs to.
type groupMember struct {
	stream, group string
	m             *actors.LiveMember
}

// Collect implements prometheus.Collector.
func (c *memberCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	groups := (*src).LiveGroups()
	now := c.now()
	var all []groupMember
	for gi := range groups {
		g := &groups[gi]
		c.collectOwnership(ch, g)
		for mi := range g.Members {
			all = append(all, groupMember{g.Stream, g.Group, &g.Members[mi]})
		}
	}
	capped := 0
	if c.maxMembers >= 0 && len(all) > c.maxMembers {
		// Beyond the cap the members with the oldest heartbeats stay: the
		// ones an operator needs to see.
		slices.SortFunc(all, func(a, b groupMember) int {
			return cmp.Or(a.m.LastHeartbeat.Compare(b.m.LastHeartbeat), cmp.Compare(a.stream, b.stream),
				cmp.Compare(a.group, b.group), cmp.Compare(a.m.ID, b.m.ID))
		})
		capped = len(all) - c.maxMembers
		all = all[:c.maxMembers]
	}
	for _, gm := range all {
		m := gm.m
		labels := []string{gm.stream, gm.group, m.ID, string(m.State)}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		if !m.LastHeartbeat.IsZero() {
			gauge(c.heartbeatAge, now.Sub(m.LastHeartbeat).Seconds())
		}
		if !m.LeaseExpires.IsZero() {
			gauge(c.leaseRemaining, m.LeaseExpires.Sub(now).Seconds())
		}
		gauge(c.current, float64(len(m.Current)))
		gauge(c.revoking, float64(len(m.Revoking)))
		gauge(c.maxConc, float64(m.MaxConcurrency))
		gauge(c.availConc, float64(m.AvailableConcurrency))
	}
	ch <- prometheus.MustNewConstMetric(c.capped, prometheus.GaugeValue, float64(capped))
}

// collectOwnership exports who reads each shard of g and how many of its
// readable shards nobody holds. These are per shard, bounded by the
// shard count, so the member cap does not apply: a shard's owner is never
// hidden.
func (c *memberCollector) collectOwnership(ch chan<- prometheus.Metric, g *actors.LiveGroup) {
	held := make(map[int]bool, len(g.Shards))
	for _, m := range g.Members {
		for _, s := range m.Current {
			held[s] = true
			ch <- prometheus.MustNewConstMetric(c.owner, prometheus.GaugeValue, 1, g.Stream, g.Group, strconv.Itoa(s), m.ID)
		}
		for _, s := range m.Revoking {
			held[s] = true
		}
	}
	unowned := 0
	for _, s := range g.Shards {
		if !held[s] {
			unowned++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.unowned, prometheus.GaugeValue, float64(unowned), g.Stream, g.Group)
}

// MemberLabelled reports whether the metric called name carries a member
// label by design: the per-member gauges (capped by [WithMaxMembers]) and
// rscoord_shard_owner. No other metric may, so that member churn does not
// grow the series count.
func MemberLabelled(name string) bool {
	switch name {
	case MemberHeartbeatAgeSeconds, MemberLeaseRemainingSeconds, MemberCurrentShards, MemberRevokingShards,
		MemberMaxConcurrency, MemberAvailableConcurrency, ShardOwner:
		return true
	}
	return false
}
