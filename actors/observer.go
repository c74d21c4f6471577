package actors

import (
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// Observer receives what the actors do, for metrics. Methods are called
// from inside actors, concurrently for different groups: implementations
// must be safe for concurrent use, fast and non-blocking. Arguments are
// not retained by the caller after the call. A nil Observer in [Config]
// is a no-op.
type Observer interface {
	// GroupStep reports one step of a group's state machine: a heartbeat,
	// a timer tick, a layout change or a restore.
	GroupStep(prefix, group string, step GroupStep)
	// GroupState reports a group's state after every durable change and
	// when its actor starts. incarnation names the actor that reports it
	// (see GroupRemoved).
	GroupState(prefix, group string, incarnation uint64, state GroupState)
	// GroupRemoved reports that a group was deleted, failed closed or
	// that its actor stopped; it reports no state until it starts again.
	// incarnation names the actor that reports it: every actor of a
	// group, a restarted one's included, has a greater incarnation than
	// the ones before it in the same coordinator. A group deleted and
	// created again at once has a new actor while the old one still
	// stops, so the old one's removal may come after the new one's first
	// state: it removes only what incarnation or an older one reported.
	GroupRemoved(prefix, group string, incarnation uint64)
	// RebalanceDone reports that a group converged (STABLE or EMPTY) took
	// after its target assignment changed.
	RebalanceDone(prefix, group string, took time.Duration)
	// StoreWrite reports one synced store write: the record kind ("group",
	// "stream", "audit"), how long it took and its error.
	StoreWrite(kind string, took time.Duration, err error)
	// StreamMigrations reports how many migrations of a stream are in each
	// state, after every change of the stream record and at start.
	StreamMigrations(prefix string, byState map[protocol.MigrationState]int)
	// StreamRemoved reports that a stream's actor stopped here (the
	// coordinator closes, or in cluster mode the stream was dropped for
	// another replica to run): its migrations are no longer reported
	// from here until it starts again.
	StreamRemoved(prefix string)
}

// Step kinds of [GroupStep].
const (
	StepHeartbeat = "heartbeat"
	StepTick      = "tick"
	StepLayout    = "layout"
	StepRestore   = "restore"
	// StepHeldAnswer is a held heartbeat (waitMs) run again to answer it.
	StepHeldAnswer = "held"
)

// GroupStep is one step of a group's state machine.
type GroupStep struct {
	// Kind is StepHeartbeat, StepTick, StepLayout, StepRestore or
	// StepHeldAnswer.
	Kind string
	// Events is what the step did.
	Events assign.Events
	// Persisted is true when the step wrote the group's snapshot.
	Persisted bool
}

// GroupState is a group's state as metrics see it: no member ids.
type GroupState struct {
	State           protocol.GroupState
	GroupEpoch      int64
	AssignmentEpoch int64
	MembersByState  map[protocol.MemberState]int
	// PendingRevocations is the number of shards members still report as
	// revoking.
	PendingRevocations int
	// InvariantViolations is the number of violated invariants
	// (assign.CheckInvariants); anything but 0 is a bug.
	InvariantViolations int
}

// violations are the invariant violations the actor's last audit found
// plus the epoch regressions it saw (see groupActor.audit).
func groupState(g *assign.Group, violations int) GroupState {
	// O(states): the group keeps its counts as it changes; this runs
	// after every durable step.
	c := g.Counts()
	return GroupState{
		State: g.State, GroupEpoch: g.GroupEpoch, AssignmentEpoch: g.AssignmentEpoch,
		MembersByState: c.ByState, PendingRevocations: c.Revoking,
		InvariantViolations: violations,
	}
}

// nopObserver is the Observer of a Config without one.
type nopObserver struct{}

func (nopObserver) GroupStep(string, string, GroupStep)                      {}
func (nopObserver) GroupState(string, string, uint64, GroupState)            {}
func (nopObserver) GroupRemoved(string, string, uint64)                      {}
func (nopObserver) RebalanceDone(string, string, time.Duration)              {}
func (nopObserver) StoreWrite(string, time.Duration, error)                  {}
func (nopObserver) StreamMigrations(string, map[protocol.MigrationState]int) {}
func (nopObserver) StreamRemoved(string)                                     {}
