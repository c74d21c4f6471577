package leakcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// The ignored function must be the one protoactor runs: after an update
// that renames it, this fails instead of the ignore quietly matching nothing.
func TestDeadLetterLeavesTheIgnoredGoroutine(t *testing.T) {
	// A throttle period longer than goleak's retries (well under a second)
	// keeps the goroutine alive through both checks.
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(5 * time.Second))
	defer system.Shutdown()
	pid := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	system.Root.Send(pid, "to a stopped actor")

	if err := goleak.Find(); err == nil || !strings.Contains(err.Error(), actorThrottle) {
		t.Fatalf("no goroutine running %s after a dead letter; goleak found: %v", actorThrottle, err)
	}
	if err := goleak.Find(goleak.IgnoreTopFunction(actorThrottle)); err != nil && strings.Contains(err.Error(), actorThrottle) {
		t.Fatalf("the ignore did not hide the throttle: %v", err)
	}
}
