package member

import (
	"slices"
	"sync"
	"time"
)

// MemberState is where one logical member is, as [Runtime.Status] reports it.
type MemberState string

// Member states.
const (
	// StateIdle: Run has not started the member (or Run has not been called).
	StateIdle MemberState = "IDLE"
	// StateStarting: checking Redis, or waiting for the answer to its join.
	StateStarting MemberState = "STARTING"
	// StateActive: joined, lease valid; it reads the shards it owns (maybe none).
	StateActive MemberState = "ACTIVE"
	// StateRejoining: the coordinator dropped the member (fenced, unknown
	// member, or another process holds the id); it is joining again.
	StateRejoining MemberState = "REJOINING"
	// StateSuspended: no heartbeat succeeded for the member lease; reads
	// and ACKs are stopped until one does.
	StateSuspended MemberState = "SUSPENDED"
	// StateRedisDown: Redis failed repeatedly; the member gave its shards
	// back and rejoins once Redis answers again.
	StateRedisDown MemberState = "REDIS_DOWN"
	// StateLeaving: draining and leaving the group.
	StateLeaving MemberState = "LEAVING"
	// StateStopped: left the group; Run is returning or returned.
	StateStopped MemberState = "STOPPED"
	// StateFailed: stopped on an error no retry heals (see Err).
	StateFailed MemberState = "FAILED"
)

// MemberStatus is one logical member's state.
type MemberStatus struct {
	MemberID string
	State    MemberState
	// Epoch is the member epoch of the last answer (0 while joining).
	Epoch int64
	// Owned are the shards the member owns, sorted.
	Owned []int
	// LastHeartbeat is when the last successful heartbeat answer (OK,
	// SYNC_METADATA, REVOKE_PENDING) arrived; zero before the first.
	LastHeartbeat time.Time
	// Failures counts heartbeats that failed in a row (transport errors,
	// non-2xx answers, RETRY).
	Failures int
	// Reason says, for people, why the member is not ACTIVE ("" when it is).
	Reason string
	// Err is the error that stopped a FAILED member.
	Err error
}

// Status is the state of every logical member of a Runtime.
type Status struct {
	// Ready is true while Run runs and every member is ACTIVE: joined,
	// with a valid lease and a working Redis. A member that owns no shard
	// (more members than shards) is ready too.
	Ready   bool
	Members []MemberStatus
}

// board is where member actors publish their state for Status; it is
// shared by the Runtime and its actors.
type board struct {
	mu      sync.Mutex
	members map[string]MemberStatus
}

func newBoard(ids []string) *board {
	b := &board{members: make(map[string]MemberStatus, len(ids))}
	for _, id := range ids {
		b.members[id] = MemberStatus{MemberID: id, State: StateIdle, Owned: []int{}}
	}
	return b
}

func (b *board) set(s MemberStatus) {
	b.mu.Lock()
	b.members[s.MemberID] = s
	b.mu.Unlock()
}

func (b *board) status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Status{Ready: len(b.members) > 0, Members: make([]MemberStatus, 0, len(b.members))}
	for _, m := range b.members {
		m.Owned = slices.Clone(m.Owned)
		st.Members = append(st.Members, m)
		if m.State != StateActive {
			st.Ready = false
		}
	}
	slices.SortFunc(st.Members, func(x, y MemberStatus) int {
		switch {
		case x.MemberID < y.MemberID:
			return -1
		case x.MemberID > y.MemberID:
			return 1
		}
		return 0
	})
	return st
}

// Status reports the state of every logical member: for readiness probes
// and operators. It never blocks on I/O.
func (r *Runtime) Status() Status { return r.board.status() }

// Ready reports whether every logical member is ACTIVE (see
// [Status].Ready): the answer for a readiness probe.
func (r *Runtime) Ready() bool { return r.board.status().Ready }
