package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisLogger writes go-redis's own log lines (dial failures, pool
// trouble) through the server's slog logger at WARN: go-redis otherwise
// prints them with the standard library logger on stderr, plain text that
// breaks --log-format json.
type redisLogger struct{ log *slog.Logger }

// Printf implements go-redis's internal logging interface.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	// go-redis starts most messages with its own "redis: " prefix; the
	// component attribute says as much.
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.WarnContext(ctx, msg)
}

// routeRedisLogs sends go-redis's log lines to log. go-redis has one
// logger per process (redis.SetLogger): the server, which owns the
// process, sets it once before opening any client.
func routeRedisLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{log: log.With(slog.String("component", "go-redis"))})
}
