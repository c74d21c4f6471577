package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/persistence"
)

// fdHeadroom is how many file descriptors are kept for everything but
// client connections: Pebble's files, Redis connections, logs.
const fdHeadroom = 256

// httpLimits are the HTTP limits of the configuration, the connection cap
// lowered to fit the file descriptor limit (with a warning).
func (c *Config) httpLimits(log *slog.Logger) gateway.HTTPLimits {
	limits := c.HTTP
	limits.MaxConnections = c.maxConnections(log)
	return limits
}

// maxConnections is the connection cap, lowered to what the file
// descriptor limit leaves after fdHeadroom (past it, accept fails with
// "too many open files" and nothing can be served); it warns when lowered.
func (c *Config) maxConnections(log *slog.Logger) int {
	fit := c.connectionCap()
	if fit < c.HTTP.MaxConnections {
		log.Warn("--http-max-connections lowered to fit the file descriptor limit (raise ulimit -n to allow more)",
			slog.Int("requested", c.HTTP.MaxConnections), slog.Int("allowed", fit))
	}
	return fit
}

// connectionCap is the connection cap, lowered to fit the file descriptor
// limit.
func (c *Config) connectionCap() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return c.HTTP.MaxConnections
	}
	fit := int(min(lim.Cur, 1<<30)) - fdHeadroom
	if fit < c.HTTP.MaxConnections {
		return max(fit, 16)
	}
	return c.HTTP.MaxConnections
}

// HeldCap is maxHeld of the connection cap; it warns when that lowers an
// explicit MaxHeldHeartbeats (the file descriptor limit lowered the cap,
// or the setting asks for more than the connections can carry), so that
// an operator who raised it for many held members learns why some are
// answered at once.
func (c *Config) HeldCap(log *slog.Logger) int {
	held := c.MaxHeld(c.connectionCap())
	if c.MaxHeldHeartbeats > held {
		log.Warn("--max-held-heartbeats lowered to what three quarters of the connection cap carry (raise --http-max-connections, and ulimit -n, or turn on --http2, to hold more)",
			slog.Int("requested", c.MaxHeldHeartbeats), slog.Int("allowed", held), slog.Int("connectionCap", c.connectionCap()),
			slog.Bool("http2", c.HTTP.HTTP2))
	}
	return held
}

// MaxHeld is MaxHeldHeartbeats for a connection cap of conns. Held
// answers keep their connections busy, and the gateway lets them keep at
// most three quarters of the cap busy (gateway.HTTPLimits
// MaxHeldConnections), so that joins, reports and admin calls always find
// a connection (at the cap, accepting waits for a busy connection to end,
// which a held one does only after its wait). Over HTTP/1.1 that is one
// held answer a connection; over HTTP/2 up to MaxConcurrentStreams.
// Without HTTP/2 the default is that bound; with it, the bound or
// actors.DefaultMaxHeldHeartbeats, whichever is lower, since each parked
// answer costs memory of its own.
func (c *Config) MaxHeld(conns int) int {
	limit := gateway.DefaultMaxHeldConnections(conns)
	if c.HTTP.HTTP2 {
		limit *= max(c.HTTP.MaxConcurrentStreams, 1)
	}
	switch {
	case c.MaxHeldHeartbeats > 0:
		return min(c.MaxHeldHeartbeats, limit)
	case c.HTTP.HTTP2:
		return min(limit, actors.DefaultMaxHeldHeartbeats)
	}
	return limit
}

// storeCloseTimeout bounds closing the store on shutdown.
const storeCloseTimeout = 10 * time.Second

// CloseStore closes store, waiting at most wait. A write stuck in the
// engine (a commit in Pebble's write stall on a full disk, which only a
// flush that succeeds ends) holds Close until the disk takes writes again,
// and SIGTERM must still stop the process. Leaving the store unclosed
// loses nothing acknowledged: every answer waited for its synced write.
func CloseStore(store io.Closer, wait time.Duration) error {
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

// pruneAudit enforces audit retention now and every AuditPruneInterval
// until ctx ends. A failed run is logged and retried at the next tick.
func (c *Config) pruneAudit(ctx context.Context, st persistence.Store, log *slog.Logger) {
	retention := persistence.AuditRetention{MaxAge: c.AuditMaxAge, MaxBytes: c.AuditMaxBytes}
	store, ok := st.(auditPruner)
	if !ok || retention.MaxAge <= 0 && retention.MaxBytes <= 0 {
		return
	}
	tick := time.NewTicker(c.AuditPruneInterval)
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

// Bounds of one coordinator Redis command: short, so that a provisioning
// against a stopped Redis fails well inside the caller's request.
const (
	redisDialTimeout = 2 * time.Second
	redisIOTimeout   = 2 * time.Second
)

// openRedis connects lazily to Redis with the other Redis settings.
func (c *Config) openRedis() (redis.UniversalClient, error) {
	nat, err := redisconn.ParseNATMap(c.RedisNATMap)
	if err != nil {
		return nil, fmt.Errorf("--redis-nat-map: %w", err)
	}
	rdb, err := redisconn.Open(strings.Join(c.Redis, ","), redisconn.Config{
		Username: c.RedisUsername, Password: c.RedisPassword, CAFile: c.RedisCAFile, NATMap: nat,
		DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout, MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("--redis: %w", err)
	}
	return rdb, nil
}

// redactRedis is the Redis addresses for the log, the passwords of URLs
// hidden.
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
