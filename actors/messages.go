package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
)

// Messages a group actor handles. Each is answered with a reply of its own
// type, except tick and flush, and a heartbeat, whose answer goes to its
// answerTo.
type (
	heartbeatMsg struct {
		req *protocol.HeartbeatRequest
		to  answerTo
		// gone is closed once the asker has given up (its request's
		// context ended); nil for an asker that never does.
		gone <-chan struct{}
		// origin is where the heartbeat came from (members API).
		origin Origin
	}
	// tickMsg is the group's own timer firing.
	tickMsg struct{}
	// flushMsg makes the group actor write its pending changes and send
	// the heartbeat answers held for them.
	flushMsg       struct{}
	getGroupMsg    struct{}
	membersMsg     struct{}
	assignmentsMsg struct{}
	consumptionMsg struct{}
	routingMsg     struct{}
	deleteGroupMsg struct{ force bool }
	// layoutStatusMsg asks for the group's layout and state, answered
	// with a layoutStatus: the stream actor's convergence check.
	layoutStatusMsg struct{}
	setLayoutMsg    struct {
		shardCount int
		draining   []int
		migration  *protocol.Migration
	}
)

// Messages a stream actor handles.
type (
	// readyMsg is answered once the stream actor has spawned its groups.
	readyMsg       struct{}
	ensureGroupMsg struct {
		name string
		// mustCreate makes an existing group an error (admin create)
		// instead of a success (auto-registration).
		mustCreate bool
		// fly is set for a registration no admin route asked for: it is
		// limited unless its caller is ADMIN, and audited here.
		fly *onTheFly
		// floor is the create request's versionFloor: a group this ask
		// creates starts above it.
		floor int64
	}
	groupDeletedMsg struct{ name string }
	// deletePlanMsg asks what a stream delete would remove, answered
	// with a deletePlan.
	deletePlanMsg struct{}
	// deleteStreamMsg deletes the stream record; the stream must have no
	// group left.
	deleteStreamMsg struct{}
	scaleMsg        struct{ req protocol.ScaleRequest }
	rollbackMsg     struct {
		id  string
		req protocol.OperatorRequest
	}
	completeMsg struct {
		id  string
		req protocol.OperatorRequest
	}
	migrationsMsg struct{}
	// drainCheckMsg is the stream actor's own timer firing: step the
	// active migration (resume provisioning, DRAINING, retire shards).
	drainCheckMsg struct{}
	// shardsMsg asks for the readable shards of the stream, answered with
	// a streamLayout.
	shardsMsg struct{}
)

// layoutStatus answers layoutStatusMsg.
type layoutStatus struct {
	shardCount int
	draining   []int
	state      protocol.GroupState
}

// streamLayout answers shardsMsg.
type streamLayout struct {
	shardCount      int
	draining        []int
	metadataVersion int64
	// spanned is one past the highest shard index any layout of the
	// stream had (its migrations' counts included): keys from 0 up to it
	// may hold the stream's consumer groups.
	spanned int
	// active is the migration in progress, or nil.
	active *protocol.Migration
}

// reply carries a value of the type its request names, or an error, back
// to the asker. Errors meant for the client are *protocol.Error. Every
// request has its own T, so an asker checks the answer's type (see
// replyValue) instead of asserting it blindly.
type reply[T any] struct {
	value T
	err   error
}

// resultOf waits for f and returns its typed reply; an answer of another
// type is an error, never a panic. It blocks: callers outside actors only.
func resultOf[T any](f *actor.Future) (T, error) {
	return replyValue[T](f.Result())
}

// streamInit is what a stream actor starts from: its record and its groups
// as loaded from the store.
type streamInit struct {
	record persistence.StreamRecord
	groups []persistence.GroupRecord
}

// answerTo is where a heartbeat's answer goes: a channel of one that the
// asking handler waits on. A heartbeat is asked through a channel rather
// than a protoactor future because a held heartbeat is the commonest
// request and a future costs a registered process, a timer and a second
// lookup per answer; the handler also stops waiting when its client goes.
type answerTo chan heartbeatAnswer

// heartbeatAnswer is what a group actor tells the asker of a heartbeat:
// the group's decision, or a refusal, which Coordinator.Heartbeat turns
// into the answer (assign.Refusal.Answer) as it does its own refusals.
type heartbeatAnswer struct {
	resp    protocol.HeartbeatResponse
	refusal assign.Refusal
}

// send delivers resp unless an answer was delivered already (a RETRY after
// a panic that followed the answer): like a message to a finished future,
// the second is dropped, and the actor never blocks on it. A nil answerTo
// (no asker) drops it too.
func (to answerTo) send(resp protocol.HeartbeatResponse) { to.deliver(heartbeatAnswer{resp: resp}) }

// refuse delivers a refusal, as send delivers an answer.
func (to answerTo) refuse(r assign.Refusal) { to.deliver(heartbeatAnswer{refusal: r}) }

func (to answerTo) deliver(a heartbeatAnswer) {
	select {
	case to <- a:
	default:
	}
}
