package redisconn

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Logger is a go-redis logger that writes go-redis's own log lines (dial
// failures, pool trouble) to a slog logger at WARN, tagged
// component=go-redis, instead of the standard library logger on stderr,
// whose plain text breaks a program's structured logs.
//
// go-redis has one logger per process (redis.SetLogger), not one per
// client, so where its lines go is the program's choice, made once in
// main; no library of this module installs it:
//
//	redis.SetLogger(redisconn.NewLogger(log))
type Logger struct{ log *slog.Logger }

// NewLogger returns a Logger writing to log; nil means slog.Default().
func NewLogger(log *slog.Logger) *Logger {
	if log == nil {
		log = slog.Default()
	}
	return &Logger{log: log.With(slog.String("component", "go-redis"))}
}

// Printf logs one go-redis line at WARN; it is go-redis's logging
// interface. go-redis starts most lines with "redis: ", which the
// component attribute already says.
func (l *Logger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}
