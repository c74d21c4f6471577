package producer

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// Option limits.
const (
	// MinRefreshInterval is the smallest WithRefreshInterval accepted.
	MinRefreshInterval = 10 * time.Millisecond
	// MaxMaxAttempts is the largest WithMaxAttempts accepted.
	MaxMaxAttempts = 10
	// DefaultMaxAttempts is the default of WithMaxAttempts: the first try and
	// one retry after a refresh.
	DefaultMaxAttempts = 2
	// DefaultFetchTimeout is the default of WithFetchTimeout.
	DefaultFetchTimeout = 5 * time.Second
)

// Opt configures a Producer; pass any number to New. Later options override
// earlier ones.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// config is what the options set; New validates it as a whole.
type config struct {
	coordinators    []string
	prefix          string
	group           string
	redis           redis.UniversalClient
	redisSet        bool
	refreshInterval time.Duration
	routingLease    time.Duration
	fetchTimeout    time.Duration
	maxAttempts     int
	maxLen          int64
	approxTrim      bool
	httpClient      *http.Client
	httpSet         bool
	logger          *slog.Logger
	// authorization is the Authorization header sent to the coordinator;
	// empty sends none.
	authorization string
	authSet       int
	// startWait: WithStartWait(true).
	startWait bool
}

func defaultConfig() config {
	return config{
		refreshInterval: protocol.DefaultProducerRefreshInterval,
		routingLease:    protocol.DefaultProducerRoutingLease,
		fetchTimeout:    DefaultFetchTimeout,
		maxAttempts:     DefaultMaxAttempts,
		approxTrim:      true,
		logger:          slog.New(slog.DiscardHandler),
	}
}

// WithCoordinator sets the coordinator's base URL, e.g.
// "http://127.0.0.1:8080" or "127.0.0.1:8080" (required; http or https, no
// query; a trailing slash is ignored). The producer appends /coord/v1/…
// itself. Several URLs (arguments, or one comma-separated list) are
// replicas of a coordinator cluster: a fetch that cannot connect to one
// tries the next.
func WithCoordinator(baseURLs ...string) Opt {
	return optFunc(func(c *config) { c.coordinators = baseURLs })
}

// WithStream sets the stream prefix to publish to, e.g. "orders" (required;
// 1–200 of [A-Za-z0-9._:-]).
func WithStream(prefix string) Opt {
	return optFunc(func(c *config) { c.prefix = prefix })
}

// WithGroup sets the consumer group whose routing is fetched. Default: the
// stream prefix (the default group every stream has). Routing is the same
// for every group of a stream; the group matters because the coordinator
// registers (and, with Redis configured, provisions) it on first use.
func WithGroup(group string) Opt {
	return optFunc(func(c *config) { c.group = group })
}

// WithRedis sets the Redis client records are written with (required): a
// *redis.Client for a standalone server or a *redis.ClusterClient for a
// Redis Cluster. redisconn.Open builds one from a host:port list or a
// redis:// / rediss:// URL, with a CA file for TLS and a NAT map for a
// Redis Cluster behind NAT. The caller owns it and closes it after Close.
func WithRedis(client redis.UniversalClient) Opt {
	return optFunc(func(c *config) { c.redis, c.redisSet = client, true })
}

// WithRefreshInterval sets how often routing is refreshed in the background.
// Default protocol.DefaultProducerRefreshInterval (5 s); at least 10 ms and
// less than the routing lease, so that a lease survives a missed refresh.
func WithRefreshInterval(d time.Duration) Opt {
	return optFunc(func(c *config) { c.refreshInterval = d })
}

// WithRoutingLease sets how long routing may be used without a successful
// refresh; past it Publish refreshes it first, and fails closed with
// ErrRoutingLeaseExpired when that refresh fails. Default
// protocol.DefaultProducerRoutingLease (30 s); must exceed the refresh
// interval. A coordinator that says its own routing lease (routingLeaseMs,
// docs/protocol.md §9.8) bounds it: the smaller of the two is used, since a
// record written on older routing may land in a shard already proven
// drained.
func WithRoutingLease(d time.Duration) Opt {
	return optFunc(func(c *config) { c.routingLease = d })
}

// WithFetchTimeout bounds one routing request to the coordinator. Default
// 5 s; must be positive.
func WithFetchTimeout(d time.Duration) Opt {
	return optFunc(func(c *config) { c.fetchTimeout = d })
}

// WithMaxAttempts sets how many times a record is written when its shard
// stream is missing (stale routing), a refresh between each. Default 2 (the
// first try and one retry); 1 to 10.
func WithMaxAttempts(n int) Opt {
	return optFunc(func(c *config) { c.maxAttempts = n })
}

// WithMaxLen trims each shard stream to about n entries on every XADD
// (MAXLEN ~ n, or MAXLEN n with WithApproxTrim(false)). Default 0: no
// trimming; must not be negative. Trimming drops the oldest entries whether
// or not a consumer group has read them.
func WithMaxLen(n int64) Opt {
	return optFunc(func(c *config) { c.maxLen = n })
}

// WithApproxTrim chooses approximate trimming (MAXLEN ~ n, the default: Redis
// trims whole macro nodes, cheaply, keeping at least n entries) or exact
// trimming (MAXLEN n, costlier). It matters only with WithMaxLen.
func WithApproxTrim(approx bool) Opt {
	return optFunc(func(c *config) { c.approxTrim = approx })
}

// WithHTTPClient sets the HTTP client of routing requests (must not be nil),
// e.g. one whose transport adds credentials. Default: a client of its own,
// whose idle connections Close closes; a given client is left alone.
func WithHTTPClient(hc *http.Client) Opt {
	return optFunc(func(c *config) { c.httpClient, c.httpSet = hc, true })
}

// WithLogger sets the logger of refresh failures and routing changes.
// Default (and nil): discard.
func WithLogger(l *slog.Logger) Opt {
	return optFunc(func(c *config) {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.logger = l
	})
}

// WithStartWait(true) makes Start wait for the coordinator instead of
// failing at once while it cannot be reached or answers that it cannot
// serve now (a transport error, 429, 503, a 5xx without an error body):
// Start then retries with backoff (100ms doubling to 2s, plus jitter) until
// it succeeds, ctx ends, or the coordinator answers something no retry
// heals (an unknown stream or group, refused credentials, a stream without
// shards), logging each failure at WARN (the first, then every tenth).
// Bound the wait with Start's context. Default false.
func WithStartWait(on bool) Opt {
	return optFunc(func(c *config) { c.startWait = on })
}

// validate reports every problem of c at once.
func (c *config) validate() error {
	var errs []error
	if c.authSet > 1 {
		errs = append(errs, errors.New("WithBasicAuth and WithBearerToken exclude each other"))
	}
	if len(c.coordinators) == 0 {
		errs = append(errs, errors.New("WithCoordinator is required"))
	} else if _, err := coordclient.ParseURLs(c.coordinators...); err != nil {
		errs = append(errs, fmt.Errorf("WithCoordinator: %w", err))
	}
	if c.prefix == "" {
		errs = append(errs, errors.New("WithStream is required"))
	} else if err := protocol.ValidateStreamPrefix(c.prefix); err != nil {
		errs = append(errs, fmt.Errorf("WithStream: %w", err))
	}
	if c.group != "" {
		if err := protocol.ValidateConsumerGroup(c.group); err != nil {
			errs = append(errs, fmt.Errorf("WithGroup: %w", err))
		}
	}
	if c.redis == nil {
		if c.redisSet {
			errs = append(errs, errors.New("WithRedis: client is nil"))
		} else {
			errs = append(errs, errors.New("WithRedis is required"))
		}
	}
	if c.refreshInterval < MinRefreshInterval {
		errs = append(errs, fmt.Errorf("WithRefreshInterval(%s): must be at least %s", c.refreshInterval, MinRefreshInterval))
	}
	if c.routingLease <= c.refreshInterval {
		errs = append(errs, fmt.Errorf("WithRoutingLease(%s): must exceed the refresh interval %s", c.routingLease, c.refreshInterval))
	}
	if c.fetchTimeout <= 0 {
		errs = append(errs, fmt.Errorf("WithFetchTimeout(%s): must be positive", c.fetchTimeout))
	}
	if c.maxAttempts < 1 || c.maxAttempts > MaxMaxAttempts {
		errs = append(errs, fmt.Errorf("WithMaxAttempts(%d): must be 1 to %d", c.maxAttempts, MaxMaxAttempts))
	}
	if c.maxLen < 0 {
		errs = append(errs, fmt.Errorf("WithMaxLen(%d): must not be negative", c.maxLen))
	}
	if c.httpSet && c.httpClient == nil {
		errs = append(errs, errors.New("WithHTTPClient: client is nil"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("producer: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// WithBasicAuth sends HTTP Basic credentials to the coordinator on every
// call (docs/protocol.md §4: producer routing needs READ or MEMBER, heartbeats
// MEMBER when the server runs with member auth). Default: no credentials.
// Conflicts with WithBearerToken.
func WithBasicAuth(username, password string) Opt {
	return optFunc(func(c *config) {
		c.authorization = protocol.BasicAuthorization(username, password)
		c.authSet++
	})
}

// WithBearerToken sends an access token from POST /auth/login to the
// coordinator on every call. Tokens expire (7 days by default): a
// long-running process should prefer WithBasicAuth. Conflicts with
// WithBasicAuth.
func WithBearerToken(token string) Opt {
	return optFunc(func(c *config) {
		c.authorization = protocol.BearerAuthorization(token)
		c.authSet++
	})
}
