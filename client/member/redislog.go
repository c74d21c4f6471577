package member

import (
	"context"
	"fmt"
	"log/slog"
)

// RedisLogger is a go-redis logger that writes go-redis's own log lines
// (dial failures, pool trouble) to a slog logger at WARN, tagged
// component=go-redis, instead of the standard library logger on stderr.
//
// The runtime does not install it: go-redis has one logger per process
// (redis.SetLogger), not one per client, so where its lines go is the
// program's choice, made once in main:
//
//	redis.SetLogger(member.NewRedisLogger(log))
type RedisLogger struct{ log *slog.Logger }

// NewRedisLogger returns a RedisLogger writing to log; nil means
// slog.Default().
func NewRedisLogger(log *slog.Logger) *RedisLogger {
	if log == nil {
		log = slog.Default()
	}
	return &RedisLogger{log: log.With(slog.String("component", "go-redis"))}
}

// Printf logs one go-redis line at WARN; it is go-redis's logging
// interface.
func (l *RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}
