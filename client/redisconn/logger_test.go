package redisconn_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/redisconn"
)

// TestLoggerWritesToSlog: go-redis's Printf lines reach the slog logger at
// WARN, formatted, tagged component=go-redis, without go-redis's prefix.
func TestLoggerWritesToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := redisconn.NewLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	got := buf.String()
	for _, want := range []string{"level=WARN", `msg="connection pool: failed to dial after 5 attempts"`, "component=go-redis"} {
		if !strings.Contains(got, want) {
			t.Errorf("log line %q lacks %q", got, want)
		}
	}
}
