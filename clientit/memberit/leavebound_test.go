package memberit_test

import (
	"context"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
)

// TestLeaveTimeoutBoundsRun: with a handler that ignores its context,
// WithLeaveTimeout(4s) bounds the whole of Run after its context ends —
// drain, leave heartbeat and the stop of the workers — and the abandoned
// record stays pending.
func TestLeaveTimeoutBoundsRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "leavebound", 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // registered first: runs after the runtime's stop
	running := make(chan struct{}, 1)
	r := e.start("lb", func(context.Context, *member.Message) error {
		running <- struct{}{}
		<-release // ignores its context
		return nil
	}, member.WithLeaveTimeout(4*time.Second))
	e.publish(0, 1, "lb")
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not called within 10s")
	}
	start := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Run returned %v after its context ended, want at most 5s (leave timeout 4s)", took)
		}
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		r.once.Do(func() {}) // stopped here; the cleanup need not wait again
	case <-time.After(5 * time.Second):
		t.Fatal("Run had not returned 5s after its context ended (leave timeout 4s)")
	}
	if n := e.pending(0); n != 1 {
		t.Fatalf("%d pending after the abandoned handler, want 1", n)
	}
}
