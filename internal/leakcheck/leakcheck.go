// Package leakcheck is the goroutine-leak check of the test binaries that
// run the coordinator's actor system in their own process.
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// actorThrottle is protoactor's dead-letter log throttle: after a dead
// letter (say, the answer to an ask that timed out, as a join's registration
// answered RETRY leaves) it runs a one-second timer on a goroutine that
// ends by itself, so a test that stops its actor system a moment later
// still sees it.
const actorThrottle = "github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"

// VerifyTestMain runs the package's tests as goleak.VerifyTestMain does,
// ignoring the goroutines the actor system leaves that end by themselves.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(opts, goleak.IgnoreTopFunction(actorThrottle))...)
}

// Find is goleak.Find ignoring what VerifyTestMain ignores, for a test main
// that must stop something of its own before it looks.
func Find(opts ...goleak.Option) error {
	return goleak.Find(append(opts, goleak.IgnoreTopFunction(actorThrottle))...)
}
