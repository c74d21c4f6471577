package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
)

// Config is everything a coordinator server is run with. Start from
// [DefaultConfig]: Validate refuses a zero duration or count rather than
// serving with a default in its place. Errors name each setting by its
// rscoord serve flag, which is how operators set it.
type Config struct {
	// Listen is the address the HTTP API listens on ("127.0.0.1:0" picks
	// a free port; see Server.URL).
	Listen string
	// DataDir holds the Pebble store and, when they are not given, the
	// token secret and the bootstrap admin.
	DataDir string
	// AcceptWALLoss opens a Pebble store whose write-ahead log is damaged
	// past a torn last record, keeping what can be read: the loss is
	// logged at ERROR and audited, and health stays DEGRADED
	// (persistence.Options.AcceptWALLoss). Without it such a store refuses
	// to open.
	AcceptWALLoss bool
	// Logger receives every log line; nil discards them.
	Logger *slog.Logger
	// Now is the coordinator's clock; nil is time.Now.
	Now func() time.Time
	// Version is the build version the metrics report.
	Version string

	// Group holds the group timing and size settings (heartbeat interval,
	// member lease, rebalance timeout, stale member retention, maximum
	// correction step, maximum members).
	Group            assign.Config
	DefaultShards    int
	AutoCreateGroups bool
	ShutdownTimeout  time.Duration

	// Auth requires credentials (docs/protocol.md §4); false makes every
	// caller an anonymous ADMIN.
	Auth bool
	// Authenticator, when set, is used instead of one built from the
	// settings below (tests); the server closes it.
	Authenticator *auth.Authenticator
	// UsersFile is the JSON users file ("": none).
	UsersFile string
	// TokenSecret signs tokens ("": the one kept in DataDir);
	// PreviousTokenSecrets still verify them.
	TokenSecret          string
	PreviousTokenSecrets []string
	// AdminPassword is the bootstrap admin's password ("": generated once
	// and printed to AnnounceTo).
	AdminPassword string
	TokenTTL      time.Duration

	// Gateway holds the gateway's settings: member auth, public metrics,
	// rate and login limits, body memory, trusted proxies. Open sets its Logger, Auth,
	// Metrics, Ready and Cluster, and turns LocalHostsOnly on for a
	// loopback listener without credentials, unless AnyHost.
	Gateway gateway.Options
	// AnyHost keeps LocalHostsOnly as Gateway says (tests that send
	// made-up Host headers).
	AnyHost bool

	AuditMaxAge        time.Duration
	AuditMaxBytes      int64
	AuditPruneInterval time.Duration

	// HTTP is the HTTP server's limits; MaxConnections is lowered to fit
	// the file descriptor limit.
	HTTP gateway.HTTPLimits

	MetricsInterval   time.Duration
	MetricsTimeout    time.Duration
	MetricsMaxMembers int
	// ReferenceMetrics also exports the reference design's
	// redis_stream_coord_* families, for its Grafana dashboards.
	ReferenceMetrics bool

	// Redis is where shard streams are provisioned and drains proved: one
	// host:port, several cluster seeds, or a redis:// or rediss:// URL.
	Redis         []string
	RedisUsername string
	RedisPassword string
	RedisCAFile   string
	RedisNATMap   string
	// StreamRedis, when set, is used instead of a client of Redis (tests).
	StreamRedis          actors.StreamRedis
	ProducerRoutingLease time.Duration
	DrainCheckInterval   time.Duration
	RetireRemovedShards  bool
	// AutoscaleInterval is how often streams with an autoscaling policy
	// read their load and decide; MaxShards bounds every stream's count.
	AutoscaleInterval time.Duration
	MaxShards         int
	// MaxHeldHeartbeats bounds the heartbeats held at once (0: three
	// quarters of the connection cap; see maxHeld).
	MaxHeldHeartbeats int
	// MaxGroupsPerStream and MaxGroupRegistrationsPerPrincipal bound the
	// groups registered on the fly by callers without ADMIN on the stream
	// (actors.Config); 0 takes the defaults.
	MaxGroupsPerStream                int
	MaxGroupRegistrationsPerPrincipal int

	// Cluster is the cluster mode on etcd; nil runs one Pebble process.
	Cluster *ClusterConfig
}

// ClusterConfig is the cluster mode: several replicas share one etcd
// cluster.
type ClusterConfig struct {
	EtcdEndpoints []string
	EtcdPrefix    string
	EtcdUsername  string
	EtcdPassword  string
	EtcdCA        string
	EtcdCert      string
	EtcdKey       string
	// LeaseTTL is this replica's etcd lease.
	LeaseTTL     time.Duration
	AdvertiseURL string
	// ReplicaID names this replica ("": the advertise URL's host:port).
	ReplicaID string
}

// DefaultConfig is the configuration of rscoord serve without flags.
func DefaultConfig() Config {
	return Config{
		Listen:  "127.0.0.1:8080",
		DataDir: "./data",
		Group: assign.Config{
			HeartbeatInterval: 3 * time.Second, MemberLease: 15 * time.Second, RebalanceTimeout: 60 * time.Second,
			StaleMemberRetention: 10 * time.Minute, MaxCorrectionStep: 1_000_000, MaxMembers: 10_000,
		},
		DefaultShards: 4, AutoCreateGroups: true, ShutdownTimeout: 30 * time.Second,
		Auth: true, TokenTTL: 168 * time.Hour,
		Gateway: gateway.Options{
			AdminRateLimit: 30, AdminRateWindow: time.Minute,
			LoginFailureLimit: 10, LoginAddressFailureLimit: 50, LoginFailureWindow: 5 * time.Minute,
			BodyMemory: 256 << 20,
		},
		AuditMaxAge: 2160 * time.Hour, AuditMaxBytes: 256 << 20, AuditPruneInterval: 5 * time.Minute,
		HTTP: gateway.HTTPLimits{
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, WriteTimeout: 30 * time.Second,
			IdleTimeout: 90 * time.Second, MaxConnections: 4096, MaxConcurrentStreams: 100,
		},
		MetricsInterval: 15 * time.Second, MetricsTimeout: 10 * time.Second, MetricsMaxMembers: 1000,
		ProducerRoutingLease: 60 * time.Second, DrainCheckInterval: 5 * time.Second,
		AutoscaleInterval: actors.DefaultAutoscaleInterval, MaxShards: protocol.MaxShardCount,
	}
}

// DefaultEtcdPrefix and DefaultEtcdLeaseTTL are the cluster mode's
// defaults.
const (
	DefaultEtcdPrefix   = "/rscoord/"
	DefaultEtcdLeaseTTL = 2 * time.Second
)

// maxHTTP2Streams bounds the HTTP/2 streams of one connection: every
// stream may run a handler at once, and a connection's streams share its
// buffers.
const maxHTTP2Streams = 1000

// Validate reports every problem of the configuration at once; the
// coordinator checks its own settings again when it starts.
func (c *Config) Validate() error {
	errs := c.validateTiming()
	if c.ProducerRoutingLease <= 0 {
		errs = append(errs, fmt.Errorf("--producer-routing-lease %v must be positive", c.ProducerRoutingLease))
	}
	if c.DrainCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("--drain-check-interval %v must be positive", c.DrainCheckInterval))
	}
	if c.AutoscaleInterval <= 0 {
		errs = append(errs, fmt.Errorf("--autoscale-interval %v must be positive", c.AutoscaleInterval))
	}
	if c.MaxShards < 1 || c.MaxShards > protocol.MaxShardCount || c.MaxShards < c.DefaultShards {
		errs = append(errs, fmt.Errorf("--max-shards %d must be between --default-shards %d and %d", c.MaxShards, c.DefaultShards, protocol.MaxShardCount))
	}
	if c.MetricsInterval <= 0 || c.MetricsTimeout <= 0 || c.MetricsTimeout > c.MetricsInterval {
		errs = append(errs, fmt.Errorf("--metrics-interval %v and --metrics-timeout %v must be positive, the timeout at most the interval", c.MetricsInterval, c.MetricsTimeout))
	}
	if c.MetricsMaxMembers < 0 {
		errs = append(errs, fmt.Errorf("--metrics-max-members %d must not be negative", c.MetricsMaxMembers))
	}
	if c.Group.MaxMembers < 1 {
		errs = append(errs, fmt.Errorf("--max-group-members %d must be at least 1", c.Group.MaxMembers))
	}
	errs = append(errs, c.validateHTTP()...)
	for _, a := range c.Redis {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, errors.New("--redis holds an empty address"))
		}
	}
	if _, err := redisconn.ParseNATMap(c.RedisNATMap); err != nil {
		errs = append(errs, fmt.Errorf("--redis-nat-map: %w", err))
	}
	if (c.RedisCAFile != "" || c.RedisNATMap != "") && len(c.Redis) == 0 {
		errs = append(errs, errors.New("--redis-ca-file and --redis-nat-map need --redis"))
	}
	if c.AuditMaxAge < 0 || c.AuditMaxBytes < 0 {
		errs = append(errs, errors.New("--audit-max-age and --audit-max-bytes must not be negative (0: no bound)"))
	}
	if c.AuditPruneInterval <= 0 {
		errs = append(errs, fmt.Errorf("--audit-prune-interval %v must be positive", c.AuditPruneInterval))
	}
	if c.TokenTTL <= 0 {
		errs = append(errs, fmt.Errorf("--token-ttl %v must be positive", c.TokenTTL))
	}
	g := c.Gateway
	for _, l := range []struct {
		name   string
		limit  int
		window time.Duration
	}{
		{"--admin-rate-limit", g.AdminRateLimit, g.AdminRateWindow},
		{"--login-failure-limit", g.LoginFailureLimit, g.LoginFailureWindow},
		{"--login-address-failure-limit", g.LoginAddressFailureLimit, g.LoginFailureWindow},
	} {
		if l.limit < 0 {
			errs = append(errs, fmt.Errorf("%s %d must not be negative (0: no limit)", l.name, l.limit))
		}
		if l.limit > 0 && l.window <= 0 {
			errs = append(errs, fmt.Errorf("%s needs a positive window, not %v", l.name, l.window))
		}
	}
	if err := gateway.CheckTrustedProxies(g.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("--trusted-proxies: %w", err))
	}
	if c.Cluster != nil {
		errs = append(errs, c.Cluster.validate(c.Group.MemberLease)...)
	}
	return errors.Join(errs...)
}

// validateHTTP checks the HTTP limits and the held heartbeats they carry.
func (c *Config) validateHTTP() []error {
	var errs []error
	h := c.HTTP
	if h.MaxConcurrentStreams < 1 || h.MaxConcurrentStreams > maxHTTP2Streams {
		errs = append(errs, fmt.Errorf("--http2-max-concurrent-streams %d must be between 1 and %d", h.MaxConcurrentStreams, maxHTTP2Streams))
	}
	switch {
	case c.MaxHeldHeartbeats < 0:
		errs = append(errs, fmt.Errorf("--max-held-heartbeats %d must not be negative (0: the default)", c.MaxHeldHeartbeats))
	case !h.HTTP2 && c.MaxHeldHeartbeats > 0 && c.MaxHeldHeartbeats >= h.MaxConnections:
		errs = append(errs, fmt.Errorf("--max-held-heartbeats %d must be 0 (three quarters of the connection cap) or below --http-max-connections %d: over HTTP/1.1 a held heartbeat keeps its connection busy (--http2 lets held heartbeats share connections)", c.MaxHeldHeartbeats, h.MaxConnections))
	case h.HTTP2 && h.MaxConnections > 0 && c.MaxHeldHeartbeats > gateway.DefaultMaxHeldConnections(h.MaxConnections)*max(h.MaxConcurrentStreams, 1):
		errs = append(errs, fmt.Errorf("--max-held-heartbeats %d must be at most three quarters of --http-max-connections %d times --http2-max-concurrent-streams %d (%d): the streams that held heartbeats may keep busy", c.MaxHeldHeartbeats, h.MaxConnections, h.MaxConcurrentStreams, gateway.DefaultMaxHeldConnections(h.MaxConnections)*max(h.MaxConcurrentStreams, 1)))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--http-read-header-timeout", h.ReadHeaderTimeout}, {"--http-read-timeout", h.ReadTimeout},
		{"--http-write-timeout", h.WriteTimeout}, {"--http-idle-timeout", h.IdleTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	if c.Gateway.BodyMemory < 0 {
		errs = append(errs, fmt.Errorf("--http-body-memory %d must not be negative", c.Gateway.BodyMemory))
	}
	if h.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("--http-max-connections %d must be at least 1", h.MaxConnections))
	}
	return errs
}

// validateTiming checks the group timing and size settings. The library
// (assign.Config, actors.Config) reads a zero or negative value as "the
// default", which suits a caller that leaves a field unset; here
// --member-lease 0s is a mistake, and serving with 15s instead would hide
// it.
func (c *Config) validateTiming() []error {
	var errs []error
	g := c.Group
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--heartbeat-interval", g.HeartbeatInterval}, {"--member-lease", g.MemberLease},
		{"--rebalance-timeout", g.RebalanceTimeout}, {"--stale-member-retention", g.StaleMemberRetention},
		{"--shutdown-timeout", c.ShutdownTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	// A reconciling group is answered the shorter reconcile interval, which
	// must not exceed the steady one (actors.Config.Validate).
	reconcile := g.ReconcileInterval
	if reconcile <= 0 {
		reconcile = protocol.DefaultReconcileHeartbeatInterval
	}
	if g.HeartbeatInterval > 0 && g.HeartbeatInterval < reconcile {
		errs = append(errs, fmt.Errorf("--heartbeat-interval %v must be at least %v (the interval answered while a group reconciles)",
			g.HeartbeatInterval, reconcile))
	}
	if g.HeartbeatInterval > 0 && g.MemberLease > 0 && g.MemberLease <= g.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("--member-lease %v must be longer than --heartbeat-interval %v: a member would expire between two heartbeats",
			g.MemberLease, g.HeartbeatInterval))
	}
	if c.DefaultShards < 1 || c.DefaultShards > protocol.MaxShardCount {
		errs = append(errs, fmt.Errorf("--default-shards %d must be between 1 and %d", c.DefaultShards, protocol.MaxShardCount))
	}
	if g.MaxCorrectionStep < 1 {
		errs = append(errs, fmt.Errorf("--max-correction-step %d must be at least 1", g.MaxCorrectionStep))
	}
	return errs
}

// validate reports every problem of the cluster settings.
func (c *ClusterConfig) validate(memberLease time.Duration) []error {
	var errs []error
	if len(c.EtcdEndpoints) == 0 {
		errs = append(errs, errors.New("--store etcd needs --etcd-endpoints"))
	}
	if c.AdvertiseURL == "" {
		errs = append(errs, errors.New("--store etcd needs --advertise-url"))
	}
	if (c.EtcdCert == "") != (c.EtcdKey == "") {
		errs = append(errs, errors.New("--etcd-cert and --etcd-key go together"))
	}
	if c.EtcdCA != "" || c.EtcdCert != "" {
		// The etcd client speaks clear text to an http:// (or unix://)
		// endpoint whatever its TLS configuration says: the CA would be
		// checked nowhere, and the etcd password would cross in clear.
		for _, ep := range c.EtcdEndpoints {
			if s := endpointScheme(ep); s == "http" || s == "unix" {
				errs = append(errs, fmt.Errorf("--etcd-ca and --etcd-cert turn TLS on, but endpoint %q is clear text: give it as https://", ep))
			}
		}
	}
	if c.LeaseTTL < cluster.MinLeaseTTL {
		errs = append(errs, fmt.Errorf("--etcd-lease-ttl %v is below %v", c.LeaseTTL, cluster.MinLeaseTTL))
	}
	if c.LeaseTTL*2 > memberLease {
		errs = append(errs, fmt.Errorf("--etcd-lease-ttl %v is over half of --member-lease %v: members would fail closed before a dead replica's groups move", c.LeaseTTL, memberLease))
	}
	if !strings.HasSuffix(c.EtcdPrefix, "/") {
		errs = append(errs, fmt.Errorf("--etcd-prefix %q must end in /", c.EtcdPrefix))
	}
	return errs
}

// endpointScheme is the scheme of an etcd endpoint URL, lower-cased; ""
// for a bare host:port.
func endpointScheme(ep string) string {
	scheme, _, ok := strings.Cut(ep, "://")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// replicaID is ReplicaID, by default the advertise URL's host and port.
func (c *ClusterConfig) replicaID() string {
	if c.ReplicaID != "" {
		return c.ReplicaID
	}
	return strings.TrimPrefix(strings.TrimPrefix(c.AdvertiseURL, "https://"), "http://")
}

// coordinatorLabel is the coordinator label of the reference design's
// metrics: the replica id in cluster mode, else the host name.
func (c *Config) coordinatorLabel() string {
	if c.Cluster != nil {
		return c.Cluster.replicaID()
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "rscoord"
}
