package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/redistest"
)

// TestSignalWhileStartingIsInterrupted stops the pod while it still
// retries its first routing request (the coordinator does not answer):
// the error says so, and the summary line agrees that a signal stopped
// the run.
func TestSignalWhileStartingIsInterrupted(t *testing.T) {
	t.Parallel()
	rdb := redistest.Standalone(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--coordinator", closed, "--redis", rdb.Addr, "--stream", "orders",
		"--published-log", filepath.Join(t.TempDir(), "published.jsonl"), "--pod", "pod-a"}, &stdout, &stderr)
	if code != exitError || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("exit %d, want %d with the error saying it was interrupted:\n%s", code, exitError, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted=true") {
		t.Errorf("the summary does not say the run was interrupted:\n%s", stderr.String())
	}
}
