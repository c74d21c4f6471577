package member

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLogger sends go-redis's own log lines (dial failures, pool
// trouble) to the Runtime's slog logger at WARN, instead of the standard
// library logger on stderr.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}

// routeRedisLogs makes go-redis log through log. go-redis has one logger
// per process (redis.SetLogger), not one per client: the last Runtime
// started in a process decides where its lines go.
func routeRedisLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{log: log.With(slog.String("component", "go-redis"))})
}
