package actors

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// capturedLog is a slog text handler's output, safe for the actors that
// write it while the test reads it.
type capturedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *capturedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count is how many lines hold s ("" counts every line).
func (l *capturedLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if line != "" && strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// A second process heartbeating 1,500 times under a live member's id is
// answered RETRY each time, and logged once: the log grows by a few lines,
// not one per heartbeat.
func TestDuplicateMemberHeartbeatsAreLoggedOnce(t *testing.T) {
	var out capturedLog
	c, err := Start(context.Background(), Config{
		Store: pebbleStore(t), AutoCreateGroups: true, Logger: slog.New(slog.NewTextHandler(&out, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	first := join("m1")
	first.InstanceID = "first"
	if resp := c.Heartbeat(ctx, "orders", "orders", "m1", first); resp.Status != protocol.StatusOK {
		t.Fatalf("join: %s %s", resp.Status, resp.ErrorCode)
	}
	before := out.count("")
	second := join("m1")
	second.InstanceID = "second"
	for i := range 1500 {
		resp := c.Heartbeat(ctx, "orders", "orders", "m1", second)
		if resp.Status != protocol.StatusRetry || resp.ErrorCode != protocol.CodeMemberIDInUse {
			t.Fatalf("duplicate heartbeat %d: %s %s", i, resp.Status, resp.ErrorCode)
		}
	}
	if n := out.count("live member's id"); n != 1 {
		t.Errorf("%d duplicate-id warnings, want 1", n)
	}
	if added := out.count("") - before; added > 50 {
		t.Errorf("1,500 duplicate heartbeats added %d log lines, want at most 50", added)
	}
}
