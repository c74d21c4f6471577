package member

import (
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Messages of a member actor. Timers and goroutines may deliver one after
// the actor stopped; protoactor then drops it without a dead-letter log.

// beatMsg: time to heartbeat.
type beatMsg struct{}

// answerMsg carries the outcome of one heartbeat request.
type answerMsg struct {
	// core names the incarnation of the member actor that sent the
	// request: an answer for an incarnation that failed and restarted is
	// dropped.
	core *memberCore
	req  protocol.HeartbeatRequest
	resp protocol.HeartbeatResponse
	err  error
	// sentAt is when the request was sent, on the lease clock, and
	// sentWall the same instant on the wall clock.
	sentAt   time.Duration
	sentWall time.Time
	leave    bool
}

// leaseCheckMsg: the lease may have expired.
type leaseCheckMsg struct{}

// runIdleMsg: a stopping run has nothing in flight any more.
type runIdleMsg struct{ run *shardRun }

// drainDeadlineMsg: a revoked run must be let go now, drained or not. at
// is the deadline it was set for; a message for an earlier deadline of the
// same run is stale.
type drainDeadlineMsg struct {
	run *shardRun
	at  time.Duration
}

// leaveMsg: Run's context is done; drain and leave the group, everything
// over by by.
type leaveMsg struct{ by time.Time }

// leaveDeadlineMsg: the leave timeout passed; leave now.
type leaveDeadlineMsg struct{}

func (*beatMsg) IgnoreDeadLetterLogging()          {}
func (*answerMsg) IgnoreDeadLetterLogging()        {}
func (*leaseCheckMsg) IgnoreDeadLetterLogging()    {}
func (*runIdleMsg) IgnoreDeadLetterLogging()       {}
func (*drainDeadlineMsg) IgnoreDeadLetterLogging() {}
func (*leaveMsg) IgnoreDeadLetterLogging()         {}
func (*leaveDeadlineMsg) IgnoreDeadLetterLogging() {}

// memberExit is what a member actor reports to Run when it is done: it
// left the group (err nil) or failed (UNSUPPORTED_PROTOCOL,
// INVALID_REQUEST).
type memberExit struct {
	id  string
	err error
}
