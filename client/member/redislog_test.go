package member_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/member"
)

// TestRedisLoggerWritesToSlog: go-redis's Printf lines reach the slog
// logger at WARN, formatted and tagged component=go-redis.
func TestRedisLoggerWritesToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := member.NewRedisLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	got := buf.String()
	for _, want := range []string{"level=WARN", "failed to dial after 5 attempts", "component=go-redis"} {
		if !strings.Contains(got, want) {
			t.Errorf("log line %q lacks %q", got, want)
		}
	}
}
