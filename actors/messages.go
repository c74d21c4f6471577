package actors

import (
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/protocol"
)

// Messages a group actor handles. Each is answered with a reply (or, for a
// heartbeat, a protocol.HeartbeatResponse), except tick.
type (
	heartbeatMsg struct{ req *protocol.HeartbeatRequest }
	// tickMsg is the group's own timer firing.
	tickMsg        struct{}
	getGroupMsg    struct{}
	membersMsg     struct{}
	assignmentsMsg struct{}
	consumptionMsg struct{}
	routingMsg     struct{}
	deleteGroupMsg struct{ force bool }
	setLayoutMsg   struct {
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
	}
	groupDeletedMsg struct{ name string }
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
)

// reply carries a value or an error back to the asker. Errors meant for
// the client are *protocol.Error.
type reply struct {
	value any
	err   error
}

// streamInit is what a stream actor starts from: its record and its groups
// as loaded from the store.
type streamInit struct {
	record persistence.StreamRecord
	groups []persistence.GroupRecord
}
