package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/redisops"
)

// ServeCmd runs the coordinator server. Every flag can also be set from the
// RSCOORD_… environment variable named in its tag, or from a --config file
// (config.go); the command line wins over the environment, which wins over
// the file.
type ServeCmd struct {
	Config               kong.ConfigFlag `placeholder:"FILE" help:"YAML file of serve flags by their long names (listen: 127.0.0.1:8080, member-lease: 15s, redis: [a:6379, b:6379], …); flags and RSCOORD_… variables override it, unknown keys are refused. Secrets stay in the environment."`
	Listen               string          `default:"127.0.0.1:8080" env:"RSCOORD_LISTEN" help:"Address the HTTP API listens on."`
	DataDir              string          `default:"./data" env:"RSCOORD_DATA_DIR" help:"Directory of the embedded Pebble store (and of the token secret and bootstrap admin when they are not given)."`
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
	MetricsInterval       time.Duration `default:"15s" env:"RSCOORD_METRICS_INTERVAL" help:"How often the shard (length, pending, lag from Redis) and member (heartbeat age, lease) gauges are collected, in the background."`
	MetricsTimeout        time.Duration `default:"10s" env:"RSCOORD_METRICS_TIMEOUT" help:"Bound of one collection round (at most --metrics-interval); series of groups not read in time are absent until a later round."`
	MetricsMaxMembers     int           `default:"1000" env:"RSCOORD_METRICS_MAX_MEMBERS" help:"Most members exported by the per-member gauges (those with the oldest heartbeats first); the rest are counted in rscoord_member_series_capped."`

	Redis                []string      `placeholder:"HOST:PORT|URL" sep:"," env:"RSCOORD_REDIS" help:"Redis the coordinator provisions shard streams in and proves drains against: one host:port is a standalone server, several the seeds of a cluster; or a redis:// or rediss:// (TLS) URL, with addr= parameters for further cluster seeds. None: scales skip provisioning and drain proofs."`
	RedisUsername        string        `env:"RSCOORD_REDIS_USERNAME" help:"ACL user for --redis (its password comes from RSCOORD_REDIS_PASSWORD); a URL with its own credentials keeps them."`
	RedisCAFile          string        `name:"redis-ca-file" placeholder:"FILE" env:"RSCOORD_REDIS_CA_FILE" help:"PEM file of the CAs that sign the Redis server certificate of a rediss:// --redis (default: the system's)."`
	RedisNATMap          string        `name:"redis-nat-map" placeholder:"ANNOUNCED=REACHABLE,…" env:"RSCOORD_REDIS_NAT_MAP" help:"Redis Cluster nodes behind NAT: announced-host:port=connect-host:port,… maps each address the cluster announces to one the coordinator reaches (makes --redis a cluster even with one seed)."`
	ProducerRoutingLease time.Duration `default:"60s" env:"RSCOORD_PRODUCER_ROUTING_LEASE" help:"No migration leaves ACTIVE, and no removed shard retires, sooner than this after activation: the longest a producer may publish on stale routing."`
	DrainCheckInterval   time.Duration `default:"5s" env:"RSCOORD_DRAIN_CHECK_INTERVAL" help:"How often an ACTIVE or DRAINING migration is checked against Redis."`
	RetireRemovedShards  bool          `default:"false" negatable:"" env:"RSCOORD_RETIRE_REMOVED_SHARDS" help:"Delete the keys of removed shards once their migration is DEPRECATED, so that late producers hit NOMKSTREAM."`
	MaxHeldHeartbeats    int           `default:"0" env:"RSCOORD_MAX_HELD_HEARTBEATS" help:"Most heartbeats held at once for their waitMs, across all groups; past it heartbeats are answered at once. A held heartbeat keeps its connection busy (over HTTP/2, one stream of it), and connections busy with held ones are at most three quarters of the connection cap: without --http2 below --http-max-connections, 0 three quarters of the connection cap; with --http2 at most that times --http2-max-concurrent-streams, 0 65536 (or that bound, if lower)."`
	MaxGroupMembers      int           `default:"10000" env:"RSCOORD_MAX_GROUP_MEMBERS" help:"Most members one group holds (terminal ones included until pruned); a join past it is answered RETRY with errorCode MEMBER_LIMIT_REACHED."`
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
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// Run starts the server and blocks until ctx is done (SIGINT/SIGTERM), then
// shuts down in order:
//
//  1. the coordinator stops taking mutations (503 COORDINATOR_TERMINATING)
//     and answers heartbeats RETRY, so members keep their shards;
//  2. the HTTP server stops accepting and waits for in-flight requests,
//     at most ShutdownTimeout;
//  3. the actors stop, each after the message it is handling;
//  4. the store closes, so Pebble's files are clean for the next start.
//
// In the cluster mode (--store etcd) a replica that loses its etcd lease
// stops serving as above and joins again as a stand-by, until ctx is done.
func (s *ServeCmd) Run(ctx context.Context) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log := s.logger()
	// go-redis has one logger per process, and the server owns the
	// process: its lines go through the server's logger (--log-format).
	redis.SetLogger(redisconn.NewLogger(log))
	if s.Store == "etcd" {
		return s.runCluster(ctx, log)
	}
	return s.runOnce(ctx, log, nil)
}

// rejoinLoop runs the server again and again in the cluster mode: a
// replica that lost its lease stops serving as the owner and joins again
// as a stand-by, until ctx is done.
func (s *ServeCmd) rejoinLoop(ctx context.Context, log *slog.Logger, f *front) error {
	rejoining := false
	for {
		err := s.runOnce(ctx, log, f)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Stopped while joining again: nothing to hand over.
			log.Info("stopped while joining the cluster")
			return nil
		}
		if ctx.Err() != nil || err == nil {
			return err
		}
		// After a lost lease every failure is retried: etcd may still be
		// without quorum, and the replica must come back when it returns.
		if !errors.Is(err, cluster.ErrLeaseLost) && !rejoining {
			return err
		}
		rejoining = true
		log.Warn("joining the cluster again", slog.Any("reason", err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// runOnce is one run of the server: until ctx is done or, in the cluster
// mode, the replica's lease is lost (an error wrapping cluster.ErrLeaseLost).
// In the cluster mode f is the replica's listener's handler: runOnce
// serves through it once it owns the coordinator instead of listening.
func (s *ServeCmd) runOnce(ctx context.Context, log *slog.Logger, f *front) error {
	store, rep, err := s.openStore(ctx, log, f)
	if err != nil {
		return fmt.Errorf("serve: open store: %w", err)
	}
	// The address is taken before anything that cannot be undone: a first
	// start prints the generated admin password once, and a start that
	// then failed on an address in use would have spent it.
	var ln net.Listener
	if f == nil {
		if ln, err = net.Listen("tcp", s.Listen); err != nil {
			return errors.Join(fmt.Errorf("serve: listen on %s: %w", s.Listen, err), store.Close())
		}
		// Every return before the server serves on it closes it.
		defer func() {
			if ln != nil {
				ln.Close()
			}
		}()
	}
	// A replica whose lease is lost stops: its writes are refused already,
	// and a fresh process rejoins as a standby.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if rep != nil {
		// Last, after the store (and the revocations' watch) closed: the
		// etcd client. It also leaves the cluster on the error paths.
		defer rep.close(context.Background())
		go func() {
			select {
			case <-rep.node.Done():
				log.Error("replica lease lost: stopping")
				stop(cluster.ErrLeaseLost)
			case <-ctx.Done():
			}
		}()
	}
	var redisOps *redisops.Client
	var streamRedis actors.StreamRedis
	if len(s.Redis) > 0 {
		rdb, err := s.openRedis()
		if err != nil {
			return errors.Join(fmt.Errorf("serve: %w", err), store.Close())
		}
		redisOps = redisops.Wrap(rdb)
		defer redisOps.Close()
		streamRedis = redisOps
		_, cluster := rdb.(*redis.ClusterClient)
		log.Info("redis configured", slog.Any("addresses", redactRedis(s.Redis)), slog.Bool("cluster", cluster),
			slog.Duration("producerRoutingLease", s.ProducerRoutingLease), slog.Duration("drainCheckInterval", s.DrainCheckInterval),
			slog.Bool("retireRemovedShards", s.RetireRemovedShards))
	} else {
		log.Warn("no --redis: scales skip stream provisioning and drain proofs; removed shards wait for an operator")
	}
	m := metrics.New(metrics.WithVersion(buildVersion()), metrics.WithMaxMembers(s.MetricsMaxMembers))
	coord, err := actors.Start(ctx, actors.Config{
		Redis:                streamRedis,
		ProducerRoutingLease: s.ProducerRoutingLease,
		DrainCheckInterval:   s.DrainCheckInterval,
		RetireRemovedShards:  s.RetireRemovedShards,
		MaxHeldHeartbeats:    s.heldCap(log),
		Store:                store,
		Group: assign.Config{
			HeartbeatInterval:    s.HeartbeatInterval,
			MemberLease:          s.MemberLease,
			RebalanceTimeout:     s.RebalanceTimeout,
			StaleMemberRetention: s.StaleMemberRetention,
			MaxCorrectionStep:    s.MaxCorrectionStep,
			MaxMembers:           s.MaxGroupMembers,
		},
		DefaultShards:    s.DefaultShards,
		AutoCreateGroups: s.AutoCreateGroups,
		Logger:           log,
		Observer:         m,
		Placed:           rep != nil,
	})
	if err != nil {
		return errors.Join(fmt.Errorf("serve: %w", err), store.Close())
	}
	authn, stopRevocations, err := s.authenticator(ctx, log, rep)
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("serve: %w", err), coord.Close(closeCtx), store.Close())
	}
	defer stopRevocations()
	gin.SetMode(gin.ReleaseMode)
	gwOpts := gateway.Options{
		Logger: log, Auth: authn, NoMemberAuth: !s.MemberAuth, Metrics: m, MetricsPublic: s.MetricsPublic,
		AdminRateLimit: s.AdminRateLimit, AdminRateWindow: s.AdminRateWindow,
		LoginFailureLimit: s.LoginFailureLimit, LoginAddressFailureLimit: s.LoginAddressFailureLimit,
		LoginFailureWindow: s.LoginFailureWindow, BodyMemory: s.HTTPBodyMemory,
		// Without credentials a loopback server is reached only by local
		// clients, and through DNS rebinding by any web page its user
		// opens: then Host names the page's own domain.
		LocalHostsOnly: (!s.Auth || !s.MemberAuth) && s.Listen != "" && listensOnLoopback(s.Listen),
	}
	if rep != nil {
		gwOpts.Ready = rep.ready
		gwOpts.Cluster = rep.view
	}
	handler := gateway.New(coord, gwOpts)
	served := make(chan error, 1)
	var srv *gateway.HTTPServer
	var owning *ownerHandler
	if f != nil {
		forwarded := prometheus.NewCounter(prometheus.CounterOpts{Name: "rscoord_cluster_forwarded_requests_total",
			Help: "Requests this replica answered that another replica forwarded (cluster mode)."})
		if err := errors.Join(m.Registry().Register(forwarded), rep.place(ctx, coord, store, m)); err != nil {
			return errors.Join(fmt.Errorf("serve: %w", err), coord.Close(context.Background()), store.Close())
		}
		owning = f.serveOwner(handler, forwarded)
		if f.server != nil {
			m.SetConnectionSource(f.server)
		}
		rep.credible = credentialCheck{authn: authn, memberAuth: s.MemberAuth}.credible
		f.rep.Store(rep)
		log.Info("rscoord listening", slog.String("address", s.Listen), slog.String("replica", rep.node.Self().ID))
	} else {
		srv = s.httpServer(handler, log)
		m.SetConnectionSource(srv)
		log.Info("rscoord listening", slog.String("address", ln.Addr().String()), slog.String("dataDir", s.DataDir))
		serving := ln
		ln = nil // the server closes it from now on
		go func() { served <- srv.Serve(serving) }()
	}
	pruneCtx, stopPrune := context.WithCancel(ctx)
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		s.pruneAudit(pruneCtx, store, log)
	}()
	collectCtx, stopCollecting := context.WithCancel(ctx)
	collected := make(chan error, 1)
	go func() {
		collected <- collector.Run(collectCtx, collector.Config{
			Source: coord, Sink: m, Interval: s.MetricsInterval, Timeout: s.MetricsTimeout, Logger: log})
	}()

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", slog.Duration("timeout", s.ShutdownTimeout))
	case serveErr = <-served:
	}
	stopPrune()
	<-pruned
	closeCtx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	coord.BeginShutdown()
	var leaveErr error
	if rep != nil {
		// Owner key first: the next replica takes over while this one
		// drains its requests (answered RETRY / 503 from now on). The
		// etcd client is closed last (the deferred rep.close), after the
		// actors and the store: their last writes and reads are answered,
		// not cut off with an unknown outcome.
		leaveErr = rep.leave(closeCtx)
	}
	stopCollecting()
	<-collected // validated with the flags: it ends only when told to
	var httpErr error
	if srv != nil {
		httpErr = srv.Shutdown(closeCtx)
		if serveErr == nil {
			serveErr = <-served
		}
	} else {
		// The listener stays: from now on it forwards or answers RETRY.
		httpErr = f.dropOwner(closeCtx, owning)
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	err = errors.Join(serveErr, httpErr, coord.Close(closeCtx), closeStore(store, storeCloseTimeout), authn.Close(), leaveErr, lostLease(ctx))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("rscoord stopped cleanly")
	return nil
}

// storeCloseTimeout bounds closing the store on shutdown.
const storeCloseTimeout = 10 * time.Second

// closeStore closes store, waiting at most wait. A write stuck in the
// engine (a commit in Pebble's write stall on a full disk, which only a
// flush that succeeds ends) holds Close until the disk takes writes again,
// and SIGTERM must still stop the process. Leaving the store unclosed
// loses nothing acknowledged: every answer waited for its synced write.
func closeStore(store io.Closer, wait time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- store.Close() }()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("store not closed after %s: a write is stuck in it (a full or failing disk?); exiting without closing it, which loses nothing acknowledged", wait)
	}
}

// httpServer is the API's HTTP server with the HTTP limits of the flags.
func (s *ServeCmd) httpServer(handler http.Handler, log *slog.Logger) *gateway.HTTPServer {
	return gateway.NewHTTPServer(handler, gateway.HTTPLimits{
		ReadHeaderTimeout: s.HTTPReadHeaderTimeout, ReadTimeout: s.HTTPReadTimeout,
		WriteTimeout: s.HTTPWriteTimeout, IdleTimeout: s.HTTPIdleTimeout,
		MaxConnections: s.maxConnections(log), HTTP2: s.HTTP2, MaxConcurrentStreams: s.HTTP2MaxStreams,
	}, log, nil)
}

// pruneAudit enforces audit retention now and every AuditPruneInterval
// until ctx ends. A failed run is logged and retried at the next tick.
func (s *ServeCmd) pruneAudit(ctx context.Context, st persistence.Store, log *slog.Logger) {
	retention := persistence.AuditRetention{MaxAge: s.AuditMaxAge, MaxBytes: s.AuditMaxBytes}
	store, ok := st.(auditPruner)
	if !ok || retention.MaxAge <= 0 && retention.MaxBytes <= 0 {
		return
	}
	tick := time.NewTicker(s.AuditPruneInterval)
	defer tick.Stop()
	for {
		deleted, err := store.PruneAudit(ctx, retention, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("audit retention failed; retrying at the next interval", slog.Any("error", err))
		case deleted > 0:
			log.Info("audit retention deleted old entries", slog.Int("deleted", deleted),
				slog.Duration("maxAge", retention.MaxAge), slog.Int64("maxBytes", retention.MaxBytes))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// auditPruner is a store that enforces audit retention.
type auditPruner interface {
	PruneAudit(ctx context.Context, retention persistence.AuditRetention, now time.Time) (int, error)
}

// maxHTTP2Streams bounds --http2-max-concurrent-streams: every stream may
// run a handler at once, and a connection's streams share its buffers.
const maxHTTP2Streams = 1000

// fdHeadroom is how many file descriptors are kept for everything but
// client connections: Pebble's files, Redis connections, logs.
const fdHeadroom = 256

// maxConnections is --http-max-connections, lowered to what the file
// descriptor limit leaves after fdHeadroom (past it, accept fails with
// "too many open files" and nothing can be served); it warns when lowered.
func (s *ServeCmd) maxConnections(log *slog.Logger) int {
	fit := s.connectionCap()
	if fit < s.HTTPMaxConnections {
		log.Warn("--http-max-connections lowered to fit the file descriptor limit (raise ulimit -n to allow more)",
			slog.Int("requested", s.HTTPMaxConnections), slog.Int("allowed", fit))
	}
	return fit
}

// connectionCap is --http-max-connections, lowered to fit the file
// descriptor limit.
func (s *ServeCmd) connectionCap() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return s.HTTPMaxConnections
	}
	fit := int(min(lim.Cur, 1<<30)) - fdHeadroom
	if fit < s.HTTPMaxConnections {
		return max(fit, 16)
	}
	return s.HTTPMaxConnections
}

// heldCap is maxHeld of the connection cap; it warns when that lowers an
// explicit --max-held-heartbeats (the file descriptor limit lowered the
// cap, or the flag asks for more than the connections can carry), so that
// an operator who raised it for many held members learns why some are
// answered at once.
func (s *ServeCmd) heldCap(log *slog.Logger) int {
	held := s.maxHeld(s.connectionCap())
	if s.MaxHeldHeartbeats > held {
		log.Warn("--max-held-heartbeats lowered to what three quarters of the connection cap carry (raise --http-max-connections, and ulimit -n, or turn on --http2, to hold more)",
			slog.Int("requested", s.MaxHeldHeartbeats), slog.Int("allowed", held), slog.Int("connectionCap", s.connectionCap()),
			slog.Bool("http2", s.HTTP2))
	}
	return held
}

// maxHeld is --max-held-heartbeats for a connection cap of conns. Held
// answers keep their connections busy, and the gateway lets them keep at
// most three quarters of the cap busy (gateway.HTTPLimits
// MaxHeldConnections), so that joins, reports and admin calls always find
// a connection (at the cap, accepting waits for a busy connection to end,
// which a held one does only after its wait). Over HTTP/1.1 that is one
// held answer a connection; over HTTP/2 up to --http2-max-concurrent-streams.
// Without --http2 the default is that bound; with it, the bound or
// actors.DefaultMaxHeldHeartbeats, whichever is lower, since each parked
// answer costs memory of its own.
func (s *ServeCmd) maxHeld(conns int) int {
	limit := gateway.DefaultMaxHeldConnections(conns)
	if s.HTTP2 {
		limit *= max(s.HTTP2MaxStreams, 1)
	}
	switch {
	case s.MaxHeldHeartbeats > 0:
		return min(s.MaxHeldHeartbeats, limit)
	case s.HTTP2:
		return min(limit, actors.DefaultMaxHeldHeartbeats)
	}
	return limit
}

// Bounds of one coordinator Redis command: short, so that a provisioning
// against a stopped Redis fails well inside the caller's request.
const (
	redisDialTimeout = 2 * time.Second
	redisIOTimeout   = 2 * time.Second
)

// openRedis connects lazily to --redis with the other Redis flags.
func (s *ServeCmd) openRedis() (redis.UniversalClient, error) {
	nat, err := redisconn.ParseNATMap(s.RedisNATMap)
	if err != nil {
		return nil, fmt.Errorf("--redis-nat-map: %w", err)
	}
	rdb, err := redisconn.Open(strings.Join(s.Redis, ","), redisconn.Config{
		Username: s.RedisUsername, Password: os.Getenv(envRedisPassword), CAFile: s.RedisCAFile, NATMap: nat,
		DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout, MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("--redis: %w", err)
	}
	return rdb, nil
}

// redactRedis is --redis for the log, the passwords of URLs hidden.
func redactRedis(specs []string) []string {
	out := make([]string, len(specs))
	for i, spec := range specs {
		out[i] = spec
		if u, err := url.Parse(spec); err == nil && u.User != nil {
			out[i] = u.Redacted()
		}
	}
	return out
}

// validate reports every problem of the flags at once; the coordinator
// checks its own settings again when it starts.
func (s *ServeCmd) validate() error {
	errs := s.validateTiming()
	if s.ProducerRoutingLease <= 0 {
		errs = append(errs, fmt.Errorf("--producer-routing-lease %v must be positive", s.ProducerRoutingLease))
	}
	if s.DrainCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("--drain-check-interval %v must be positive", s.DrainCheckInterval))
	}
	if s.MetricsInterval <= 0 || s.MetricsTimeout <= 0 || s.MetricsTimeout > s.MetricsInterval {
		errs = append(errs, fmt.Errorf("--metrics-interval %v and --metrics-timeout %v must be positive, the timeout at most the interval", s.MetricsInterval, s.MetricsTimeout))
	}
	if s.MetricsMaxMembers < 0 {
		errs = append(errs, fmt.Errorf("--metrics-max-members %d must not be negative", s.MetricsMaxMembers))
	}
	if s.MaxGroupMembers < 1 {
		errs = append(errs, fmt.Errorf("--max-group-members %d must be at least 1", s.MaxGroupMembers))
	}
	if s.HTTP2MaxStreams < 1 || s.HTTP2MaxStreams > maxHTTP2Streams {
		errs = append(errs, fmt.Errorf("--http2-max-concurrent-streams %d must be between 1 and %d", s.HTTP2MaxStreams, maxHTTP2Streams))
	}
	switch {
	case s.MaxHeldHeartbeats < 0:
		errs = append(errs, fmt.Errorf("--max-held-heartbeats %d must not be negative (0: the default)", s.MaxHeldHeartbeats))
	case !s.HTTP2 && s.MaxHeldHeartbeats > 0 && s.MaxHeldHeartbeats >= s.HTTPMaxConnections:
		errs = append(errs, fmt.Errorf("--max-held-heartbeats %d must be 0 (three quarters of the connection cap) or below --http-max-connections %d: over HTTP/1.1 a held heartbeat keeps its connection busy (--http2 lets held heartbeats share connections)", s.MaxHeldHeartbeats, s.HTTPMaxConnections))
	case s.HTTP2 && s.HTTPMaxConnections > 0 && s.MaxHeldHeartbeats > gateway.DefaultMaxHeldConnections(s.HTTPMaxConnections)*max(s.HTTP2MaxStreams, 1):
		errs = append(errs, fmt.Errorf("--max-held-heartbeats %d must be at most three quarters of --http-max-connections %d times --http2-max-concurrent-streams %d (%d): the streams that held heartbeats may keep busy", s.MaxHeldHeartbeats, s.HTTPMaxConnections, s.HTTP2MaxStreams, gateway.DefaultMaxHeldConnections(s.HTTPMaxConnections)*max(s.HTTP2MaxStreams, 1)))
	}
	for _, a := range s.Redis {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, errors.New("--redis holds an empty address"))
		}
	}
	if _, err := redisconn.ParseNATMap(s.RedisNATMap); err != nil {
		errs = append(errs, fmt.Errorf("--redis-nat-map: %w", err))
	}
	if (s.RedisCAFile != "" || s.RedisNATMap != "") && len(s.Redis) == 0 {
		errs = append(errs, errors.New("--redis-ca-file and --redis-nat-map need --redis"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--http-read-header-timeout", s.HTTPReadHeaderTimeout}, {"--http-read-timeout", s.HTTPReadTimeout},
		{"--http-write-timeout", s.HTTPWriteTimeout}, {"--http-idle-timeout", s.HTTPIdleTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	if s.AuditMaxAge < 0 || s.AuditMaxBytes < 0 {
		errs = append(errs, errors.New("--audit-max-age and --audit-max-bytes must not be negative (0: no bound)"))
	}
	if s.AuditPruneInterval <= 0 {
		errs = append(errs, fmt.Errorf("--audit-prune-interval %v must be positive", s.AuditPruneInterval))
	}
	if s.HTTPBodyMemory < gateway.MaxHeartbeatBodyBytes {
		errs = append(errs, fmt.Errorf("--http-body-memory %d must hold a heartbeat at its limit (%d bytes)", s.HTTPBodyMemory, gateway.MaxHeartbeatBodyBytes))
	}
	if s.HTTPMaxConnections < 1 {
		errs = append(errs, fmt.Errorf("--http-max-connections %d must be at least 1", s.HTTPMaxConnections))
	}
	if s.TokenTTL <= 0 {
		errs = append(errs, fmt.Errorf("--token-ttl %v must be positive", s.TokenTTL))
	}
	limits := []struct {
		name   string
		limit  int
		window time.Duration
	}{
		{"--admin-rate-limit", s.AdminRateLimit, s.AdminRateWindow},
		{"--login-failure-limit", s.LoginFailureLimit, s.LoginFailureWindow},
		{"--login-address-failure-limit", s.LoginAddressFailureLimit, s.LoginFailureWindow},
	}
	for _, l := range limits {
		if l.limit < 0 {
			errs = append(errs, fmt.Errorf("%s %d must not be negative (0: no limit)", l.name, l.limit))
		}
		if l.limit > 0 && l.window <= 0 {
			errs = append(errs, fmt.Errorf("%s needs a positive window, not %v", l.name, l.window))
		}
	}
	errs = append(errs, s.StoreFlags.validate(s.MemberLease)...)
	return errors.Join(errs...)
}

// validateTiming checks the group timing and size flags. The library
// (assign.Config, actors.Config) reads a zero or negative value as "the
// default", which suits a caller that leaves a field unset; on the command
// line --member-lease 0s is a mistake, and serving with 15s instead would
// hide it.
func (s *ServeCmd) validateTiming() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--heartbeat-interval", s.HeartbeatInterval}, {"--member-lease", s.MemberLease},
		{"--rebalance-timeout", s.RebalanceTimeout}, {"--stale-member-retention", s.StaleMemberRetention},
		{"--shutdown-timeout", s.ShutdownTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	// A reconciling group is answered the shorter reconcile interval, which
	// must not exceed the steady one (actors.Config.Validate).
	if s.HeartbeatInterval > 0 && s.HeartbeatInterval < protocol.DefaultReconcileHeartbeatInterval {
		errs = append(errs, fmt.Errorf("--heartbeat-interval %v must be at least %v (the interval answered while a group reconciles)",
			s.HeartbeatInterval, protocol.DefaultReconcileHeartbeatInterval))
	}
	if s.HeartbeatInterval > 0 && s.MemberLease > 0 && s.MemberLease <= s.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("--member-lease %v must be longer than --heartbeat-interval %v: a member would expire between two heartbeats",
			s.MemberLease, s.HeartbeatInterval))
	}
	if s.DefaultShards < 1 || s.DefaultShards > protocol.MaxShardCount {
		errs = append(errs, fmt.Errorf("--default-shards %d must be between 1 and %d", s.DefaultShards, protocol.MaxShardCount))
	}
	if s.MaxCorrectionStep < 1 {
		errs = append(errs, fmt.Errorf("--max-correction-step %d must be at least 1", s.MaxCorrectionStep))
	}
	return errs
}

// authenticator sets up authentication: the token secret and the
// bootstrap admin in the data directory, the users file. Nil with --no-auth.
// Revoked tokens are kept in the data directory, or in the cluster mode
// (rep not nil) in etcd, shared by every replica: stop ends the following
// of other replicas' revocations.
func (s *ServeCmd) authenticator(ctx context.Context, log *slog.Logger, rep *replica) (authn *auth.Authenticator, stop func(), err error) {
	stop = func() {}
	if !s.Auth {
		return nil, stop, nil // gateway.New logs the warning
	}
	authn, err = s.newAuthenticator(ctx, log, rep, &stop)
	if err != nil {
		stop()
		return nil, func() {}, err
	}
	return authn, stop, nil
}

func (s *ServeCmd) newAuthenticator(ctx context.Context, log *slog.Logger, rep *replica, stop *func()) (*auth.Authenticator, error) {
	secret, err := auth.LoadOrCreateSecret(s.DataDir, os.Getenv(envTokenSecret))
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	var users []auth.User
	if s.Users != "" {
		if users, err = auth.LoadUsersFile(s.Users); err != nil {
			return nil, fmt.Errorf("--users: %w", err)
		}
	}
	if !slices.ContainsFunc(users, func(u auth.User) bool { return u.Username == auth.AdminUsername }) {
		admin, err := auth.BootstrapAdmin(s.DataDir, os.Getenv(envAdminPassword), secret, 0, os.Stderr)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		users = append(users, admin)
	} else {
		log.Info("the users file defines admin; no bootstrap admin")
	}
	var previous [][]byte
	if env := os.Getenv(envPreviousTokenSecrets); env != "" {
		for _, p := range strings.Split(env, ",") {
			previous = append(previous, []byte(p))
		}
	}
	var revocations *auth.Revocations
	if rep != nil {
		revocations, *stop, err = rep.sharedRevocations(ctx, s.EtcdPrefix)
	} else {
		revocations, err = auth.OpenRevocations(s.DataDir, 0, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	authn, err := auth.New(auth.Config{Users: users, Secret: secret, PreviousSecrets: previous,
		TokenTTL: s.TokenTTL, Revocations: revocations})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("auth: %w", err), revocations.Close())
	}
	log.Info("authentication on", slog.Int("users", len(users)), slog.Bool("memberAuth", s.MemberAuth),
		slog.Duration("tokenTTL", authn.TokenTTL()), slog.Bool("metricsPublic", s.MetricsPublic))
	return authn, nil
}

// listensOnLoopback reports whether the listen address addr names a
// loopback address or localhost; ":8080" and 0.0.0.0 do not.
func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && gateway.IsLocalHost(host)
}
