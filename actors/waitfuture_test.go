package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

// TestWaitFutureLeavesNothingBehind: a wait given up with its ctx leaves no
// goroutine waiting for the future's own timeout, and a future that
// resolves is waited for as before.
func TestWaitFutureLeavesNothingBehind(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	ignore := goleak.IgnoreCurrent()

	pending := actor.NewFuture(system, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := waitFuture(ctx, system, pending); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for a future that does not resolve: %v", err)
	}
	goleak.VerifyNone(t, ignore)

	answered := actor.NewFuture(system, time.Minute)
	go system.Root.Send(answered.PID(), "answer")
	if err := waitFuture(context.Background(), system, answered); err != nil {
		t.Fatalf("wait for an answered future: %v", err)
	}
	timedOut := actor.NewFuture(system, 10*time.Millisecond)
	if err := waitFuture(context.Background(), system, timedOut); !errors.Is(err, actor.ErrTimeout) {
		t.Fatalf("wait for a future that timed out: %v", err)
	}
	// The given-up wait's process goes once its future resolves.
	system.Root.Send(pending.PID(), "late")
	if err := pending.Wait(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}
