package actors

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// protoactor's dead-letter log throttle runs a one-second timer
	// goroutine after a dead letter (an answer to an ask that timed out,
	// such as a join's registration answered RETRY): it ends by itself.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
