package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/server"
)

type ServeCmd struct {
	Config               kong.ConfigFlag `placeholder:"FILE" help:"YAML file of serve flags by their long names (listen: 127.0.0.1:8080, member-lease: 15s, redis: [a:6379, b:6379], …); flags and RSCOORD_… variables override it, unknown keys are refused. Secrets stay in the environment."`
	Listen               string          `default:"127.0.0.1:8080" env:"RSCOORD_LISTEN" help:"Address the HTTP API listens on."`
	DataDir              string          `default:"./data" env:"RSCOORD_DATA_DIR" help:"Directory of the embedded Pebble store (and of the token secret and bootstrap admin when they are not given)."`
	AcceptWALLoss        bool            `default:"false" name:"accept-wal-loss" env:"RSCOORD_ACCEPT_WAL_LOSS" help:"Open a Pebble store whose write-ahead log is damaged past a torn last record, keeping what can be read (logged at ERROR, audited, health DEGRADED until a start without this flag opens cleanly). Without it such a store refuses to start."`
	StoreFlags           `embed:""`
	HeartbeatInterval    time.Duration `default:"3s" env:"RSCOORD_HEARTBEAT_INTERVAL" help:"Heartbeat interval answered to members."`
	MemberLease          time.Duration `default:"15s" env:"RSCOORD_MEMBER_LEASE" help:"Member lease TTL."`
	RebalanceTimeout     time.Duration `default:"60s" env:"RSCOORD_REBALANCE_TIMEOUT" help:"How long a member may hold revoked shards before it is fenced."`
	DefaultShards        int           `default:"4" env:"RSCOORD_DEFAULT_SHARDS" help:"Shard count of a stream created without one."`
	StaleMemberRetention time.Duration `default:"10m" env:"RSCOORD_STALE_MEMBER_RETENTION" help:"How long expired, fenced and left members stay visible."`
	MaxCorrectionStep    int64         `default:"1000000" env:"RSCOORD_MAX_CORRECTION_STEP" help:"How far past a group's metadataVersion a member's report may move it (a metadata correction); a report further ahead is refused for that member alone."`
	AutoCreateGroups     bool          `default:"true" negatable:"" env:"RSCOORD_AUTO_CREATE_GROUPS" help:"Register an unknown group of a known stream on its first join, or on producer routing asked by a MEMBER, WRITE or ADMIN caller."`
	ShutdownTimeout      time.Duration `default:"30s" env:"RSCOORD_SHUTDOWN_TIMEOUT" help:"How long in-flight requests may take to finish on SIGTERM."`
	LogLevel             slog.Level    `default:"info" env:"RSCOORD_LOG_LEVEL" help:"Lowest log level written: debug, info, warn or error."`
	LogFormat            string        `default:"text" enum:"text,json" env:"RSCOORD_LOG_FORMAT" help:"Log format on stderr: text or json."`

	Auth                     bool          `default:"true" negatable:"" env:"RSCOORD_AUTH" help:"Require credentials (docs/protocol.md §4). --no-auth makes every caller an anonymous ADMIN: local development only."`
	MemberAuth               bool          `default:"true" negatable:"" env:"RSCOORD_MEMBER_AUTH" help:"Require the MEMBER role (on the heartbeat's stream, as a member id the user is bound to) on heartbeats. --no-member-auth lets anyone heartbeat as any member: local development only."`
	Users                    string        `placeholder:"FILE" env:"RSCOORD_USERS" help:"JSON users file: {\"users\":[{\"username\":…,\"passwordHash\":\"<bcrypt>\",\"roles\":[…]}]} (hashes from rscoord hash-password)."`
	TokenTTL                 time.Duration `default:"168h" env:"RSCOORD_TOKEN_TTL" help:"Lifetime of tokens issued by /auth/login."`
	AdminRateLimit           int           `default:"30" env:"RSCOORD_ADMIN_RATE_LIMIT" help:"Admin mutations one principal may send per group (or stream) per --admin-rate-window, for at most 1,000 groups at once; 0: no limit."`
	AdminRateWindow          time.Duration `default:"1m" env:"RSCOORD_ADMIN_RATE_WINDOW" help:"Window of --admin-rate-limit."`
	LoginFailureLimit        int           `default:"10" env:"RSCOORD_LOGIN_FAILURE_LIMIT" help:"Failed logins per username per --login-failure-window before logins answer 429; 0: no limit."`
	LoginAddressFailureLimit int           `default:"50" env:"RSCOORD_LOGIN_ADDRESS_FAILURE_LIMIT" help:"Failed password checks per client address per --login-failure-window before its Basic credentials and logins answer 429; 0: no limit."`
	LoginFailureWindow       time.Duration `default:"5m" env:"RSCOORD_LOGIN_FAILURE_WINDOW" help:"Window of the login failure limits."`
	MetricsPublic            bool          `default:"false" negatable:"" env:"RSCOORD_METRICS_PUBLIC" help:"Serve /metrics and /actuator/prometheus without credentials (otherwise READ)."`
	TrustedProxies           []string      `placeholder:"CIDR" sep:"," env:"RSCOORD_TRUSTED_PROXIES" help:"Addresses or CIDRs of the proxies in front (ingress, load balancer) whose X-Forwarded-For, else X-Real-IP, names the client: limits, audit and the members API then see the client, not the proxy. A forwarding header from any other peer is ignored. None: every peer is its own client."`

	AuditMaxAge        time.Duration `default:"2160h" env:"RSCOORD_AUDIT_MAX_AGE" help:"Audit entries older than this are deleted in the background (0: keep by age)."`
	AuditMaxBytes      int64         `default:"268435456" env:"RSCOORD_AUDIT_MAX_BYTES" help:"The audit log is cut, oldest entries first, to this many stored bytes in the background (0: no size bound)."`
	AuditPruneInterval time.Duration `default:"5m" env:"RSCOORD_AUDIT_PRUNE_INTERVAL" help:"How often audit retention is enforced."`

	HTTPReadHeaderTimeout time.Duration `default:"10s" name:"http-read-header-timeout" env:"RSCOORD_HTTP_READ_HEADER_TIMEOUT" help:"Longest time to read a request's headers."`
	HTTPReadTimeout       time.Duration `default:"60s" name:"http-read-timeout" env:"RSCOORD_HTTP_READ_TIMEOUT" help:"Longest time to read a whole request, body included; a slower body is cut off."`
	HTTPWriteTimeout      time.Duration `default:"30s" name:"http-write-timeout" env:"RSCOORD_HTTP_WRITE_TIMEOUT" help:"Longest time to write an answer; held heartbeat answers add their own bound (the heartbeat interval)."`
	HTTPIdleTimeout       time.Duration `default:"90s" name:"http-idle-timeout" env:"RSCOORD_HTTP_IDLE_TIMEOUT" help:"Keep-alive connections idle this long are closed."`
	HTTPMaxConnections    int           `default:"4096" name:"http-max-connections" env:"RSCOORD_HTTP_MAX_CONNECTIONS" help:"Open connections at most (lowered to fit the file descriptor limit); at the cap the connection idle longest is closed to make room."`
	HTTP2                 bool          `default:"false" negatable:"" name:"http2" env:"RSCOORD_HTTP2" help:"Also serve HTTP/2 over cleartext (h2c, prior knowledge) on --listen, beside HTTP/1.1: a client's requests, held heartbeats among them, share one connection. Off by default: each HTTP/2 connection carries up to --http2-max-concurrent-streams requests at once."`
	HTTP2MaxStreams       int           `default:"100" name:"http2-max-concurrent-streams" env:"RSCOORD_HTTP2_MAX_CONCURRENT_STREAMS" help:"Requests in flight at once on one HTTP/2 connection (--http2), held heartbeats included; 1 to 1000."`
	HTTPBodyMemory        int64         `default:"268435456" name:"http-body-memory" env:"RSCOORD_HTTP_BODY_MEMORY" help:"Most bytes request bodies over 64 KiB hold at once while read; a body that does not fit within 10 s answers 429. At least the heartbeat body limit (64065536)."`
	MetricsInterval       time.Duration `default:"15s" env:"RSCOORD_METRICS_INTERVAL" help:"How often the shard gauges (length, pending, lag, memory) are read from Redis, in the background; member gauges are read at scrape time."`
	MetricsTimeout        time.Duration `default:"10s" env:"RSCOORD_METRICS_TIMEOUT" help:"Bound of one collection round (at most --metrics-interval); series of groups not read in time are absent until a later round."`
	MetricsMaxMembers     int           `default:"1000" env:"RSCOORD_METRICS_MAX_MEMBERS" help:"Most members exported by the per-member gauges (those with the oldest heartbeats first); the rest are counted in rscoord_member_series_capped."`
	ReferenceMetrics      bool          `default:"false" negatable:"" env:"RSCOORD_REFERENCE_METRICS" help:"Also export the reference design's redis_stream_coord_* metrics (its Grafana dashboards query them), labelled coordinator=<replica id or host name>."`

	Redis                             []string      `placeholder:"HOST:PORT|URL" sep:"," env:"RSCOORD_REDIS" help:"Redis the coordinator provisions shard streams in and proves drains against: one host:port is a standalone server, several the seeds of a cluster; or a redis:// or rediss:// (TLS) URL, with addr= parameters for further cluster seeds. None: scales skip provisioning and drain proofs."`
	RedisUsername                     string        `env:"RSCOORD_REDIS_USERNAME" help:"ACL user for --redis (its password comes from RSCOORD_REDIS_PASSWORD); a URL with its own credentials keeps them."`
	RedisCAFile                       string        `name:"redis-ca-file" placeholder:"FILE" env:"RSCOORD_REDIS_CA_FILE" help:"PEM file of the CAs that sign the Redis server certificate of a rediss:// --redis (default: the system's)."`
	RedisNATMap                       string        `name:"redis-nat-map" placeholder:"ANNOUNCED=REACHABLE,…" env:"RSCOORD_REDIS_NAT_MAP" help:"Redis Cluster nodes behind NAT: announced-host:port=connect-host:port,… maps each address the cluster announces to one the coordinator reaches (makes --redis a cluster even with one seed)."`
	ProducerRoutingLease              time.Duration `default:"60s" env:"RSCOORD_PRODUCER_ROUTING_LEASE" help:"No migration leaves ACTIVE, and no removed shard retires, sooner than this after activation: the longest a producer may publish on stale routing."`
	DrainCheckInterval                time.Duration `default:"5s" env:"RSCOORD_DRAIN_CHECK_INTERVAL" help:"How often an ACTIVE or DRAINING migration is checked against Redis."`
	AutoscaleInterval                 time.Duration `default:"15s" env:"RSCOORD_AUTOSCALE_INTERVAL" help:"How often a stream with an autoscaling policy (mode on or dry-run) reads its shards' load in Redis and decides."`
	MaxShards                         int           `default:"100000" env:"RSCOORD_MAX_SHARDS" help:"Most shards a stream may have: creates, scales and autoscaling policies past it are refused."`
	RetireRemovedShards               bool          `default:"false" negatable:"" env:"RSCOORD_RETIRE_REMOVED_SHARDS" help:"Delete the keys of removed shards once their migration is DEPRECATED, so that late producers hit NOMKSTREAM."`
	MaxHeldHeartbeats                 int           `default:"0" env:"RSCOORD_MAX_HELD_HEARTBEATS" help:"Most heartbeats held at once for their waitMs, across all groups; past it heartbeats are answered at once. A held heartbeat keeps its connection busy (over HTTP/2, one stream of it), and connections busy with held ones are at most three quarters of the connection cap: without --http2 below --http-max-connections, 0 three quarters of the connection cap; with --http2 at most that times --http2-max-concurrent-streams, 0 65536 (or that bound, if lower)."`
	MaxGroupsPerStream                int           `default:"256" env:"RSCOORD_MAX_GROUPS_PER_STREAM" help:"Most groups a stream may hold for a caller without ADMIN on it to register another on the fly (a join or producer routing with --auto-create-groups); past it the join is answered RETRY with errorCode GROUP_LIMIT_REACHED. Admin creates are not limited."`
	MaxGroupRegistrationsPerPrincipal int           `default:"64" name:"max-group-registrations-per-principal" env:"RSCOORD_MAX_GROUP_REGISTRATIONS_PER_PRINCIPAL" help:"Most groups one principal may register on the fly per hour, across streams."`
	MaxGroupMembers                   int           `default:"10000" env:"RSCOORD_MAX_GROUP_MEMBERS" help:"Most members one group holds (terminal ones included until pruned); a join past it is answered RETRY with errorCode MEMBER_LIMIT_REACHED."`
}

// envEtcdPassword holds the etcd password: secrets stay off the command
// line.
const envEtcdPassword = "RSCOORD_ETCD_PASSWORD"

// StoreFlags choose and configure the store.
type StoreFlags struct {
	Store         string        `default:"pebble" enum:"pebble,etcd" env:"RSCOORD_STORE" help:"Store engine: pebble (embedded, one process) or etcd (the cluster mode: several replicas share one etcd cluster)."`
	EtcdEndpoints []string      `placeholder:"URL" sep:"," env:"RSCOORD_ETCD_ENDPOINTS" help:"etcd client URLs (--store etcd); list every member, so losing one does not matter."`
	EtcdPrefix    string        `default:"/rscoord/" env:"RSCOORD_ETCD_PREFIX" help:"Key prefix of this coordinator cluster in etcd; every replica of one cluster uses the same."`
	EtcdUsername  string        `env:"RSCOORD_ETCD_USERNAME" help:"etcd user (its password comes from RSCOORD_ETCD_PASSWORD)."`
	EtcdCA        string        `placeholder:"FILE" env:"RSCOORD_ETCD_CA" help:"PEM CA bundle that signs the etcd servers' certificates (turns TLS on; endpoints must then be https://)."`
	EtcdCert      string        `placeholder:"FILE" env:"RSCOORD_ETCD_CERT" help:"PEM client certificate for etcd (with --etcd-key)."`
	EtcdKey       string        `placeholder:"FILE" env:"RSCOORD_ETCD_KEY" help:"PEM private key of --etcd-cert."`
	EtcdLeaseTTL  time.Duration `default:"2s" env:"RSCOORD_ETCD_LEASE_TTL" help:"etcd lease of this replica: how long a dead or frozen replica keeps ownership (a failover takes about this long plus up to 0.5 s). At least 2s; keep it well under --member-lease."`
	AdvertiseURL  string        `placeholder:"URL" env:"RSCOORD_ADVERTISE_URL" help:"http(s) URL other replicas and clients reach this replica at (--store etcd)."`
	ReplicaID     string        `env:"RSCOORD_REPLICA_ID" help:"Unique name of this replica (--store etcd); default: the advertise URL's host and port."`
}

// Environment variables read by serve that are not flags: secrets do not
// belong on a command line, where ps shows them.
const (
	envTokenSecret = "RSCOORD_TOKEN_SECRET"
	// envPreviousTokenSecrets are comma-separated secrets that still verify
	// tokens (never sign new ones): rotate RSCOORD_TOKEN_SECRET by moving
	// the old value here until its tokens have expired.
	envPreviousTokenSecrets = "RSCOORD_TOKEN_PREVIOUS_SECRETS"
	envAdminPassword        = "RSCOORD_ADMIN_PASSWORD"
	envRedisPassword        = "RSCOORD_REDIS_PASSWORD"
)

func (s *ServeCmd) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel}
	if s.LogFormat == "json" {
		// Durations are written as Go writes them ("1.5s"), not as
		// integer nanoseconds, so that people and log stores read them
		// alike.
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// Run starts the server and blocks until ctx is done (SIGINT/SIGTERM), then
// shuts down in order (server.Server.Close). In the cluster mode (--store
// etcd) a replica that loses its etcd lease stops serving and joins again
// as a stand-by, until ctx is done.
func (s *ServeCmd) Run(ctx context.Context) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	cfg := s.config()
	cfg.Logger = s.logger()
	logReferenceAliases(cfg.Logger, os.LookupEnv)
	tuneGC(cfg.Logger, os.LookupEnv)
	// go-redis has one logger per process, and the server owns the
	// process: its lines go through the server's logger (--log-format).
	redis.SetLogger(redisconn.NewLogger(cfg.Logger))
	gin.SetMode(gin.ReleaseMode)
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := srv.Serve(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// validate reports every problem of the flags at once.
func (s *ServeCmd) validate() error {
	cfg := s.config()
	err := cfg.Validate()
	// A smaller budget serves (tests use one to reach its limit), but a
	// heartbeat at its size limit would wait out the budget and answer
	// 429 every time.
	if s.HTTPBodyMemory < gateway.MaxHeartbeatBodyBytes {
		err = errors.Join(err, fmt.Errorf("--http-body-memory %d must hold a heartbeat at its limit (%d bytes)", s.HTTPBodyMemory, gateway.MaxHeartbeatBodyBytes))
	}
	return err
}

// config maps the flags and the secrets of the environment to the
// server's configuration.
func (s *ServeCmd) config() server.Config {
	cfg := server.Config{
		Listen: s.Listen, DataDir: s.DataDir, AcceptWALLoss: s.AcceptWALLoss, Version: buildVersion(),
		Group: assign.Config{
			HeartbeatInterval: s.HeartbeatInterval, MemberLease: s.MemberLease, RebalanceTimeout: s.RebalanceTimeout,
			StaleMemberRetention: s.StaleMemberRetention, MaxCorrectionStep: s.MaxCorrectionStep, MaxMembers: s.MaxGroupMembers,
		},
		DefaultShards: s.DefaultShards, AutoCreateGroups: s.AutoCreateGroups,
		MaxGroupsPerStream: s.MaxGroupsPerStream, MaxGroupRegistrationsPerPrincipal: s.MaxGroupRegistrationsPerPrincipal, ShutdownTimeout: s.ShutdownTimeout,
		Auth: s.Auth, UsersFile: s.Users, TokenTTL: s.TokenTTL,
		TokenSecret: envOrAlias(os.LookupEnv, envTokenSecret), AdminPassword: envOrAlias(os.LookupEnv, envAdminPassword),
		Gateway: gateway.Options{
			NoMemberAuth: !s.MemberAuth, MetricsPublic: s.MetricsPublic,
			AdminRateLimit: s.AdminRateLimit, AdminRateWindow: s.AdminRateWindow,
			LoginFailureLimit: s.LoginFailureLimit, LoginAddressFailureLimit: s.LoginAddressFailureLimit,
			LoginFailureWindow: s.LoginFailureWindow, BodyMemory: s.HTTPBodyMemory,
			TrustedProxies: trimmed(s.TrustedProxies),
		},
		AuditMaxAge: s.AuditMaxAge, AuditMaxBytes: s.AuditMaxBytes, AuditPruneInterval: s.AuditPruneInterval,
		HTTP: gateway.HTTPLimits{
			ReadHeaderTimeout: s.HTTPReadHeaderTimeout, ReadTimeout: s.HTTPReadTimeout,
			WriteTimeout: s.HTTPWriteTimeout, IdleTimeout: s.HTTPIdleTimeout,
			MaxConnections: s.HTTPMaxConnections, HTTP2: s.HTTP2, MaxConcurrentStreams: s.HTTP2MaxStreams,
		},
		MetricsInterval: s.MetricsInterval, MetricsTimeout: s.MetricsTimeout, MetricsMaxMembers: s.MetricsMaxMembers,
		ReferenceMetrics: s.ReferenceMetrics,
		Redis:            s.Redis, RedisUsername: s.RedisUsername, RedisPassword: os.Getenv(envRedisPassword),
		RedisCAFile: s.RedisCAFile, RedisNATMap: s.RedisNATMap,
		ProducerRoutingLease: s.ProducerRoutingLease, DrainCheckInterval: s.DrainCheckInterval,
		RetireRemovedShards: s.RetireRemovedShards, MaxHeldHeartbeats: s.MaxHeldHeartbeats,
		AutoscaleInterval: s.AutoscaleInterval, MaxShards: s.MaxShards,
	}
	if env := os.Getenv(envPreviousTokenSecrets); env != "" {
		cfg.PreviousTokenSecrets = strings.Split(env, ",")
	}
	if s.Store == "etcd" {
		cfg.Cluster = &server.ClusterConfig{
			EtcdEndpoints: s.EtcdEndpoints, EtcdPrefix: s.EtcdPrefix, EtcdUsername: s.EtcdUsername,
			EtcdPassword: os.Getenv(envEtcdPassword), EtcdCA: s.EtcdCA, EtcdCert: s.EtcdCert, EtcdKey: s.EtcdKey,
			LeaseTTL: s.EtcdLeaseTTL, AdvertiseURL: s.AdvertiseURL, ReplicaID: s.ReplicaID,
		}
	}
	return cfg
}

// trimmed is list with the spaces around each item cut ("10.0.0.0/8,
// 192.168.0.0/16" from the environment).
func trimmed(list []string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, strings.TrimSpace(v))
	}
	return out
}
