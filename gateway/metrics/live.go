package metrics

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/internal/version"
)

// Names of the metrics other packages set or that alert rules and
// dashboards rely on. They are part of the product's interface: renaming
// one breaks deploy/prometheus/rules.yaml and the Grafana dashboard.
const (
	// BuildInfo is 1, labelled with version, revision and goversion.
	BuildInfo = "rscoord_build_info"
	// ShardLengthRecords is XLEN of a shard stream, per group reading it.
	ShardLengthRecords = "rscoord_shard_length_records"
	// ShardPendingRecords is a group's pending entries list on a shard.
	ShardPendingRecords = "rscoord_shard_pending_records"
	// ShardLagRecords is a group's lag on a shard (XINFO GROUPS lag);
	// absent, never 0, when Redis cannot tell.
	ShardLagRecords = "rscoord_shard_lag_records"
	// ShardMemoryBytes is what Redis reports a shard stream's key takes
	// in memory (MEMORY USAGE), per stream and shard: the BigKey sharding
	// exists to prevent.
	ShardMemoryBytes = "rscoord_shard_memory_bytes"
	// MemberHeartbeatAgeSeconds is the time since a member's last
	// heartbeat, read from its group actor at scrape time.
	MemberHeartbeatAgeSeconds = "rscoord_member_heartbeat_age_seconds"
	// MemberLeaseRemainingSeconds is the time until a member's lease lapses
	// (negative once it has, until the group expires the member).
	MemberLeaseRemainingSeconds = "rscoord_member_lease_remaining_seconds"
	// MemberCurrentShards and MemberRevokingShards are how many shards a
	// member reported reading and giving up.
	MemberCurrentShards  = "rscoord_member_current_shards"
	MemberRevokingShards = "rscoord_member_revoking_shards"
	// MemberMaxConcurrency and MemberAvailableConcurrency are the worker
	// capacity a member last reported.
	MemberMaxConcurrency       = "rscoord_member_max_concurrency"
	MemberAvailableConcurrency = "rscoord_member_available_concurrency"
	// MemberSeriesCapped is how many members the last scrape left out of
	// the per-member gauges because of the cardinality cap.
	MemberSeriesCapped = "rscoord_member_series_capped"
	// ShardOwner is 1 for each member that a shard's group accepted as
	// reading it.
	ShardOwner = "rscoord_shard_owner"
	// GroupUnownedShards is how many readable shards of a group no member
	// reads nor gives up.
	GroupUnownedShards = "rscoord_group_unowned_shards"
	// RedisUp is 1 when Redis answered the last collection's ping, else 0;
	// absent without --redis.
	RedisUp = "rscoord_redis_up"
	// CollectionDurationSeconds is how long the last collection round took.
	CollectionDurationSeconds = "rscoord_collection_duration_seconds"
	// CollectionErrorsTotal counts groups a collection round could not read.
	CollectionErrorsTotal = "rscoord_collection_errors_total"
	// GroupStateInfo is 1 for a group's current state and 0 for the others.
	GroupStateInfo = "rscoord_group_state"
	// StreamMigrations is how many migrations of a stream are in each state,
	// on the replica that runs the stream.
	StreamMigrations = "rscoord_stream_migrations"
	// HeldHeartbeats is how many heartbeats are held right now (waitMs).
	HeldHeartbeats = "rscoord_held_heartbeats"
	// HeldHeartbeatsLimit is the most heartbeats held at once
	// (--max-held-heartbeats as the server applies it): past it
	// heartbeats are answered at once.
	HeldHeartbeatsLimit = "rscoord_held_heartbeats_limit"
	// HTTPConnections is how many connections the HTTP server holds open;
	// absent when no server reports them (set with
	// [Metrics.SetConnectionSource]).
	HTTPConnections = "rscoord_http_connections"
	// HTTPConnectionsLimit is the connection cap (--http-max-connections,
	// lowered to fit the file descriptor limit): at it the connection
	// idle longest is closed, and while all are busy accepting waits.
	HTTPConnectionsLimit = "rscoord_http_connections_limit"
	// HTTPHeldConnections is how many connections held heartbeats keep
	// busy.
	HTTPHeldConnections = "rscoord_http_held_connections"
	// HTTPHeldConnectionsLimit is the most connections held heartbeats may
	// keep busy (three quarters of the connection cap): past it
	// heartbeats are answered at once.
	HTTPHeldConnectionsLimit = "rscoord_http_held_connections_limit"

	// ClusterReplicasLive is, in cluster mode, the number of coordinator
	// replicas this replica sees alive (set with [Metrics.SetClusterReplicasLive]).
	// Absent outside cluster mode.
	ClusterReplicasLive = "rscoord_cluster_replicas_live"
	// ClusterGroupsUnowned is, in cluster mode, the number of groups no
	// replica owns (set with [Metrics.SetClusterGroupsUnowned]). Absent
	// outside cluster mode.
	ClusterGroupsUnowned = "rscoord_cluster_groups_unowned"
	// ClusterStoreReadable is, in cluster mode, 1 when this replica's last
	// count of unowned groups could read the store (etcd), else 0; while
	// it is 0, ClusterGroupsUnowned is absent rather than a stale count.
	ClusterStoreReadable = "rscoord_cluster_store_readable"
)

// ShardStat is one shard stream as one consumer group sees it.
type ShardStat struct {
	Stream, Group string
	Shard         int
	// Length is the stream's length (0 for a missing key).
	Length int64
	// Exists is false for a missing key.
	Exists bool
	// Pending is nil when the group does not exist on the key.
	Pending *int64
	// Lag is nil when Redis cannot tell.
	Lag *int64
}

// ShardMemory is what Redis reports one shard stream's key takes in
// memory.
type ShardMemory struct {
	Stream string
	Shard  int
	Bytes  int64
}

// liveCollector exports what the background collection last read: shard
// stats and memory, Redis reachability, cluster gauges.
type liveCollector struct {
	buildInfo                       prometheus.Metric
	length, pending, lag, memory    *prometheus.Desc
	redisUp, duration               *prometheus.Desc
	clusterReplicas, clusterUnowned *prometheus.Desc
	clusterReadable                 *prometheus.Desc
	collectionErrors                prometheus.Counter

	mu             sync.Mutex
	shards         []ShardStat
	memories       []ShardMemory
	redis          *bool
	collectionTook *time.Duration
	replicasLive   *int
	groupsUnowned  *int
	storeReadable  *bool
}

func newLiveCollector(o options) *liveCollector {
	shardLabels := []string{"stream", "group", "shard"}
	build := version.Get()
	ver := build.Version
	if o.version != "" {
		ver = o.version
	}
	return &liveCollector{
		buildInfo: prometheus.MustNewConstMetric(
			prometheus.NewDesc(BuildInfo, "Always 1; the labels say which build runs.", []string{"version", "revision", "goversion"}, nil),
			prometheus.GaugeValue, 1, ver, build.Revision, build.GoVersion),
		length:  prometheus.NewDesc(ShardLengthRecords, "Entries in a shard stream (XLEN), for every group reading it.", shardLabels, nil),
		pending: prometheus.NewDesc(ShardPendingRecords, "Entries delivered to the group on a shard and not yet acknowledged (XINFO GROUPS pending).", shardLabels, nil),
		lag:     prometheus.NewDesc(ShardLagRecords, "Entries of a shard the group has not read yet (XINFO GROUPS lag); absent when Redis cannot tell.", shardLabels, nil),
		memory: prometheus.NewDesc(ShardMemoryBytes, "Bytes Redis reports the shard stream's key takes (MEMORY USAGE, sampled), read by the background collection; absent for a missing key or one not read in time.",
			[]string{"stream", "shard"}, nil),
		redisUp:         prometheus.NewDesc(RedisUp, "1 when Redis answered the last collection's ping, else 0.", nil, nil),
		duration:        prometheus.NewDesc(CollectionDurationSeconds, "Time the last collection of shard and member gauges took.", nil, nil),
		clusterReplicas: prometheus.NewDesc(ClusterReplicasLive, "Coordinator replicas this replica sees alive (cluster mode).", nil, nil),
		clusterUnowned:  prometheus.NewDesc(ClusterGroupsUnowned, "Groups no coordinator replica owns (cluster mode); absent while the store cannot be read.", nil, nil),
		clusterReadable: prometheus.NewDesc(ClusterStoreReadable, "1 when the last count of unowned groups could read the cluster's store (etcd), else 0 (cluster mode).", nil, nil),
		collectionErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: CollectionErrorsTotal, Help: "Groups a collection round could not read (their shard or member series are absent until the next round)."}),
	}
}

// Describe implements prometheus.Collector.
func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.buildInfo.Desc()
	for _, d := range []*prometheus.Desc{c.length, c.pending, c.lag, c.memory,
		c.redisUp, c.duration, c.clusterReplicas, c.clusterUnowned, c.clusterReadable} {
		ch <- d
	}
	c.collectionErrors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- c.buildInfo
	c.collectionErrors.Collect(ch)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.shards {
		shard := strconv.Itoa(s.Shard)
		ch <- prometheus.MustNewConstMetric(c.length, prometheus.GaugeValue, float64(s.Length), s.Stream, s.Group, shard)
		if s.Pending != nil {
			ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(*s.Pending), s.Stream, s.Group, shard)
		}
		if s.Lag != nil {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(*s.Lag), s.Stream, s.Group, shard)
		}
	}
	for _, m := range c.memories {
		ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(m.Bytes), m.Stream, strconv.Itoa(m.Shard))
	}
	if c.redis != nil {
		up := 0.0
		if *c.redis {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.redisUp, prometheus.GaugeValue, up)
	}
	if c.collectionTook != nil {
		ch <- prometheus.MustNewConstMetric(c.duration, prometheus.GaugeValue, c.collectionTook.Seconds())
	}
	if c.replicasLive != nil {
		ch <- prometheus.MustNewConstMetric(c.clusterReplicas, prometheus.GaugeValue, float64(*c.replicasLive))
	}
	if c.groupsUnowned != nil {
		ch <- prometheus.MustNewConstMetric(c.clusterUnowned, prometheus.GaugeValue, float64(*c.groupsUnowned))
	}
	if c.storeReadable != nil {
		readable := 0.0
		if *c.storeReadable {
			readable = 1
		}
		ch <- prometheus.MustNewConstMetric(c.clusterReadable, prometheus.GaugeValue, readable)
	}
}

// SetShardStats replaces every shard series with stats: a shard left out
// has no series until a later call names it again.
func (m *Metrics) SetShardStats(stats []ShardStat) {
	cp := slices.Clone(stats)
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	m.live.shards = cp
}

// SetShardMemory replaces every shard memory series with mems: a key
// left out has no series until a later call names it again.
func (m *Metrics) SetShardMemory(mems []ShardMemory) {
	cp := slices.Clone(mems)
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	m.live.memories = cp
}

// CollectionDone records one collection round: whether Redis answered
// (nil: Redis is not configured), how long the round took and how many
// groups it could not read.
func (m *Metrics) CollectionDone(redisUp *bool, took time.Duration, failedGroups int) {
	m.live.collectionErrors.Add(float64(failedGroups))
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	if redisUp != nil {
		up := *redisUp
		m.live.redis = &up
	} else {
		m.live.redis = nil
	}
	m.live.collectionTook = &took
}

// SetClusterReplicasLive sets rscoord_cluster_replicas_live; the gauge
// exists from the first call on (cluster mode only).
func (m *Metrics) SetClusterReplicasLive(n int) {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	m.live.replicasLive = &n
}

// SetClusterGroupsUnowned sets rscoord_cluster_groups_unowned, and
// rscoord_cluster_store_readable to 1; both gauges exist from the first
// call on (cluster mode only).
func (m *Metrics) SetClusterGroupsUnowned(n int) {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	m.live.groupsUnowned = &n
	readable := true
	m.live.storeReadable = &readable
}

// SetClusterStoreUnreadable says the count of unowned groups could not
// read the store: rscoord_cluster_store_readable is 0, and
// rscoord_cluster_groups_unowned is absent until a count succeeds, so that
// no alert reads a count from before the failure as current.
func (m *Metrics) SetClusterStoreUnreadable() {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	m.live.groupsUnowned = nil
	readable := false
	m.live.storeReadable = &readable
}

// Option configures [New].
type Option func(*options)

type options struct {
	version    string
	maxMembers int
	// reference and coordinator: see WithReferenceFamilies.
	reference   bool
	coordinator string
}

// WithVersion sets the version label of rscoord_build_info (default: the
// build's version as internal/version reports it).
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithMaxMembers caps the members exported by the per-member gauges
// (default [DefaultMaxMembers]; 0 exports none).
func WithMaxMembers(n int) Option { return func(o *options) { o.maxMembers = n } }

// DefaultMaxMembers is the default cap of the per-member gauges: at two
// series per member, 2,000 series.
const DefaultMaxMembers = 1000
