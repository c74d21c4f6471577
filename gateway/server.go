package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	jsonv2 "github.com/go-json-experiment/json"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/internal/window"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/ratelog"
)

// Options configures the HTTP handler. Zero values of the limits turn them
// off; the server (cmd/rscoord) sets them from its flags.
type Options struct {
	// Logger receives request, audit and error logs. Default slog.Default().
	Logger *slog.Logger
	// Auth checks credentials. Nil turns authentication off: every caller
	// is an anonymous ADMIN, and New logs a warning.
	Auth *auth.Authenticator
	// NoMemberAuth lets heartbeats through without credentials (local
	// development only; New logs a warning). By default, with Auth set,
	// heartbeats need MEMBER (or ADMIN) on their stream, as a member id
	// the caller is bound to.
	NoMemberAuth bool
	// Metrics is served at /metrics and /actuator/prometheus and counts
	// what the gateway sees. Default: a new, private [metrics.Metrics].
	Metrics *metrics.Metrics
	// MetricsPublic serves the metrics endpoints without credentials;
	// otherwise they need READ.
	MetricsPublic bool
	// AdminRateLimit is how many admin mutations one principal may send
	// for one group (or one stream, for stream-wide operations) per
	// AdminRateWindow; 0 means no limit.
	AdminRateLimit  int
	AdminRateWindow time.Duration
	// LoginFailureLimit is how many failed password checks one username may
	// have from one client address per LoginFailureWindow, and
	// LoginAddressFailureLimit how many one client address may have, before
	// further failures there are slowed and answered 429. Credentials that
	// verify always pass. Both apply to logins and to Basic credentials on
	// every endpoint. 0 means no limit.
	LoginFailureLimit        int
	LoginAddressFailureLimit int
	LoginFailureWindow       time.Duration
	// LoginFailureKeys bounds the windows each of the two login limits
	// holds (memory). Once one holds that many, a username or address it
	// has no window for is checked uncounted by it, never refused: an
	// attacker who fills it must not lock real users out (the other limit
	// still counts). 0: 100,000.
	LoginFailureKeys int
	// PasswordWait bounds how long a password check waits for its places:
	// under both login limits and for a bcrypt comparison. A check that
	// cannot start within it is not run, and its request is answered 429
	// with Retry-After. 0: DefaultPasswordWait.
	PasswordWait time.Duration
	// Now is the clock of the rate limiters. Default time.Now.
	Now func() time.Time
	// BodyMemory bounds the bytes request bodies over 64 KiB hold at once
	// (their size past 64 KiB, reserved before they are read); a body that
	// does not fit within BodyMemoryWait is answered 429 with
	// Retry-After. Default DefaultBodyMemory; raised to
	// MaxHeartbeatBodyBytes when lower, so that a heartbeat at its limit
	// always fits.
	BodyMemory     int64
	BodyMemoryWait time.Duration
	// Ready is an extra readiness check of GET /readyz, beside the
	// coordinator's own (store, Redis): in cluster mode, whether this
	// replica holds what it must to serve. Nil: none.
	Ready func(ctx context.Context) error
	// LocalHostsOnly answers only requests whose Host names this machine
	// (localhost, or a loopback address), others 403. The server sets it
	// when it listens on a loopback address with authentication (or
	// member authentication) off: a web page its user opens could
	// otherwise reach it through DNS rebinding, where a name of the page's
	// own resolves to 127.0.0.1 and its calls are same-origin.
	LocalHostsOnly bool
	// APITokens keeps the API tokens of /auth/tokens. Nil: those routes
	// answer 404 (the Authenticator's own source still checks tokens).
	APITokens APITokenStore
	// Cluster answers GET /coord/v1/monitoring/cluster in cluster mode.
	// Nil: the route answers 404 (one process, no cluster).
	Cluster func(ctx context.Context) (protocol.ClusterResponse, error)
	// History answers GET …/groups/{group}/history: the samples the
	// metrics collection kept. Nil: empty lists.
	History HistorySource
	// TrustedProxies are the addresses and CIDRs of the proxies in front
	// (an ingress, a load balancer) whose X-Forwarded-For or X-Real-IP
	// name the client. Requests from them are counted, audited and shown
	// under that client address; every other peer is its own client and
	// its forwarding headers are ignored. Empty: no proxy is trusted.
	// Entries must pass CheckTrustedProxies; New trusts none otherwise.
	TrustedProxies []string

	// probe, set only by tests (export_test.go), is handed the server New
	// builds, so that they can look at its limiters' memory.
	probe *probe
}

// probe receives the server New builds (tests only).
type probe struct{ s *server }

type server struct {
	coord   Backend
	log     *slog.Logger
	auth    *auth.Authenticator
	opts    Options
	metrics *metrics.Metrics
	// metricsHTTP serves metrics' registry.
	metricsHTTP http.Handler

	adminLimit *window.Limiter
	// logoutLimit counts logouts per principal apart from adminLimit, so
	// that no budget of groups ever stands in the way of revoking a token.
	logoutLimit *window.Limiter
	loginUser   *window.Limiter
	loginAddr   *window.Limiter
	// slowChecks holds the one place for password checks past a failure
	// limit (checkPassword).
	slowChecks chan struct{}
	// refusedAudit and refusedAuditAll limit the audit entries of requests
	// refused before their handler: per client address, and overall.
	refusedAudit    *window.Limiter
	refusedAuditAll *window.Limiter
	// refusedLog writes the log lines of refused requests' audit entries
	// once per client address and status a minute.
	refusedLog       *ratelog.Logger
	refusedAuditWarn *window.Limiter
	// bodies is the large-body budget (Options.BodyMemory).
	bodies *bodyMemory
	// profiles guard the one-at-a-time runtime profiles of /debug/pprof.
	profiles profiles
	// origins refuses browsers' cross-origin POSTs and DELETEs (crossOrigin).
	origins *http.CrossOriginProtection
	// heartbeatJSON and heartbeatFast decode heartbeat bodies
	// (heartbeatOptions, heartbeatFastOptions).
	heartbeatJSON, heartbeatFast jsonv2.Options
	// requestIDs makes the ids of requests that bring none.
	requestIDs *requestIDs
	// jsonContentType is the Content-Type of heartbeat answers, one
	// header value shared by all of them (net/http only reads it), as
	// gin's c.JSON shares its own.
	jsonContentType []string
	// peerIsClient says no proxy is trusted: a request's client is its
	// peer (clientIP).
	peerIsClient bool
	// rates keeps the shard observations the Grafana rows' rates are
	// computed from.
	rates rateTracker
}

// Limits of the audit entries of refused requests (401, 403, 429), per
// client address and overall, per minute.
const (
	refusedAuditPerAddress = 60
	refusedAuditOverall    = 600
)

// New returns the HTTP handler of every endpoint served by coord (the
// coordinator of package actors, in the server). Call
// gin.SetMode(gin.ReleaseMode) first outside development: gin's mode is
// its own process-wide setting.
func New(coord Backend, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	opts.Metrics.SetHeldSource(coord)
	// A backend that publishes its members' live state lets the
	// per-member gauges read it at scrape; a fake backend need not.
	if live, ok := coord.(metrics.LiveSource); ok {
		opts.Metrics.SetLiveSource(live)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BodyMemory <= 0 {
		opts.BodyMemory = DefaultBodyMemory
	}
	if opts.BodyMemory < MaxHeartbeatBodyBytes {
		opts.Logger.Warn("the large-body budget is raised to fit a heartbeat at its limit",
			slog.Int64("asked", opts.BodyMemory), slog.Int64("bytes", MaxHeartbeatBodyBytes))
		opts.BodyMemory = MaxHeartbeatBodyBytes
	}
	if opts.BodyMemoryWait <= 0 {
		opts.BodyMemoryWait = DefaultBodyMemoryWait
	}
	if opts.PasswordWait <= 0 {
		opts.PasswordWait = DefaultPasswordWait
	}
	s := &server{
		coord: coord, log: opts.Logger, auth: opts.Auth, opts: opts, metrics: opts.Metrics,
		metricsHTTP:      opts.Metrics.Handler(),
		adminLimit:       window.NewPerOwner(opts.AdminRateLimit, opts.AdminRateWindow, adminGroupsPerPrincipal, adminMaxWindows, opts.Now),
		logoutLimit:      window.New(opts.AdminRateLimit, opts.AdminRateWindow, 0, opts.Now),
		loginUser:        window.New(opts.LoginFailureLimit, opts.LoginFailureWindow, opts.LoginFailureKeys, opts.Now),
		loginAddr:        window.New(opts.LoginAddressFailureLimit, opts.LoginFailureWindow, opts.LoginFailureKeys, opts.Now),
		slowChecks:       make(chan struct{}, 1),
		refusedAudit:     window.New(refusedAuditPerAddress, time.Minute, 0, opts.Now),
		refusedAuditAll:  window.New(refusedAuditOverall, time.Minute, 1, opts.Now),
		refusedAuditWarn: window.New(1, time.Minute, 1, opts.Now),
		refusedLog:       ratelog.New(opts.Logger, time.Minute, opts.Now),
		bodies:           newBodyMemory(opts.BodyMemory, opts.BodyMemoryWait),
		profiles:         newProfiles(),
		origins:          http.NewCrossOriginProtection(),
		heartbeatJSON:    heartbeatOptions(),
		heartbeatFast:    heartbeatFastOptions(),
		requestIDs:       newRequestIDs(),
		jsonContentType:  []string{"application/json; charset=utf-8"},
	}
	if opts.probe != nil {
		opts.probe.s = s
	}
	if s.auth == nil {
		s.log.Warn("authentication is OFF: every caller is an anonymous ADMIN; use this for local development only")
	} else if opts.NoMemberAuth {
		s.log.Warn("member authentication is OFF: anyone who reaches this port can heartbeat as any member of any group; use this for local development only")
	}
	r := gin.New()
	s.trustProxies(r)
	// No redirects: gin would answer a path with an extra or missing
	// trailing slash with a 301 or 307 and an HTML body, where every
	// non-2xx answer carries the JSON error body (docs/protocol.md §3).
	// Such a path gets the 404 or 405 below instead.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NoRoute(notFound)
	r.NoMethod(methodNotAllowed)
	r.Use(s.metrics.HTTPMiddleware()) // first, so that it counts the 500 that recovery writes after a panic
	r.Use(gin.CustomRecovery(s.recovery), s.requestID, s.accessLog)
	if opts.LocalHostsOnly {
		r.Use(s.localHostsOnly)
	}
	for _, rt := range s.routes() {
		r.Handle(rt.method, rt.path, s.chain(rt)...)
	}
	return r
}

// accessLog logs every request once it is answered: heartbeats at debug
// level (they are the bulk of traffic), everything else at info. It logs
// the client address but no header and no body: credentials never reach
// the log.
func (s *server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	level := slog.LevelInfo
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead || c.FullPath() == heartbeatRoute {
		level = slog.LevelDebug
	}
	// Asked first: the attributes of a line not written would still be
	// built, per heartbeat.
	if !s.log.Enabled(c.Request.Context(), level) {
		return
	}
	s.log.LogAttrs(c.Request.Context(), level, "http request",
		slog.String("method", c.Request.Method), slog.String("route", c.FullPath()),
		slog.String("path", capField(c.Request.URL.Path)), slog.Int("status", c.Writer.Status()),
		slog.String("requestId", requestIDOf(c)), slog.String("client", c.ClientIP()),
		slog.Duration("duration", time.Since(start)))
}

// answer writes v with status, or err as an error body.
func (s *server) answer(c *gin.Context, status int, v any, err error) {
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(status, v)
}
