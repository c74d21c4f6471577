package member

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestRedisLoggerWritesToSlog: go-redis's Printf lines reach the slog
// logger at WARN, formatted.
func TestRedisLoggerWritesToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := redisLogger{log: slog.New(slog.NewTextHandler(&buf, nil))}
	l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	got := buf.String()
	if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "failed to dial after 5 attempts") {
		t.Fatalf("log line %q", got)
	}
}
