package coordtest

import (
	"crypto/rand"
	"fmt"
	"slices"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// Member simulates a member runtime over HTTP: it builds each heartbeat
// from what it reads and applies the answer as the status table of docs/protocol.md §6
// says. Revoked shards drain instantly unless HoldRevokes is set.
type Member struct {
	ID      string
	Prefix  string
	Group   string
	Epoch   int64
	Version int64
	// Owned are the shards the member reads, sorted.
	Owned []int
	// Revoking are shards given up and reported until acknowledged.
	Revoking []int
	// HoldRevokes reports revoking shards as DRAINING with work in flight,
	// as a member with slow handlers would.
	HoldRevokes bool
	// Last is the last answer received.
	Last protocol.HeartbeatResponse
	// InstanceID is sent as instanceId when not empty (our runtime);
	// empty emulates a reference client.
	InstanceID string

	// nonce makes request ids unique per simulated process, as real
	// clients' are: two processes with one member id never send the same
	// requestId.
	nonce string
	seq   int
}

// NewMember is a member of prefix/group that has not joined yet.
func NewMember(id, prefix, group string) *Member {
	return &Member{ID: id, Prefix: prefix, Group: group, Owned: []int{}, Revoking: []int{}, nonce: rand.Text()[:8]}
}

// Request is the heartbeat the member would send now.
func (m *Member) Request() protocol.HeartbeatRequest {
	m.seq++
	revoking := make([]protocol.RevokingShard, len(m.Revoking))
	for i, s := range m.Revoking {
		revoking[i] = protocol.RevokingShard{Shard: protocol.Shard{ShardIndex: s}, State: protocol.RevokeRevoked}
		if m.HoldRevokes {
			revoking[i].State, revoking[i].InFlight = protocol.RevokeDraining, 1
		}
	}
	return protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion,
		RequestID:       fmt.Sprintf("%s-%s-hb-%d", m.ID, m.nonce, m.seq),
		InstanceID:      m.InstanceID,
		MemberID:        m.ID,
		MemberName:      "sim",
		MemberEpoch:     m.Epoch,
		MetadataVersion: m.Version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{
			RuntimeMaxConcurrency: 2, AvailableConcurrency: 2,
		},
		OwnedShards:    protocol.Shards(m.Owned),
		RevokingShards: revoking,
		ShardProgress:  []protocol.ShardProgress{},
	}
}

// Beat sends one heartbeat and applies its answer.
func (m *Member) Beat(s *Server) protocol.HeartbeatResponse {
	s.t.Helper()
	req := m.Request()
	resp := s.Heartbeat(m.Prefix, m.Group, req)
	m.Apply(req, resp)
	return resp
}

// Leave sends a graceful leave.
func (m *Member) Leave(s *Server) protocol.HeartbeatResponse {
	s.t.Helper()
	m.Epoch = protocol.EpochLeave
	for _, sh := range m.Owned {
		m.Revoking = addShard(m.Revoking, sh)
	}
	m.Owned = []int{}
	req := m.Request()
	resp := s.Heartbeat(m.Prefix, m.Group, req)
	m.Last = resp
	return resp
}

// Apply applies the answer resp to the request req it answered.
func (m *Member) Apply(req protocol.HeartbeatRequest, resp protocol.HeartbeatResponse) {
	m.Last = resp
	assigned := protocol.Indexes(resp.Assignment.AssignedShards)
	switch resp.Status {
	case protocol.StatusOK:
		m.Epoch, m.Version = resp.MemberEpoch, resp.MetadataVersion
		m.ackRevokes(req)
		for _, s := range m.Owned {
			if !slices.Contains(assigned, s) {
				m.Revoking = addShard(m.Revoking, s)
			}
		}
		m.Owned = slices.Clone(assigned)
		slices.Sort(m.Owned)
	case protocol.StatusSyncMetadata, protocol.StatusRevokePending:
		m.Epoch, m.Version = resp.MemberEpoch, resp.MetadataVersion
		m.ackRevokes(req)
		kept := []int{}
		for _, s := range m.Owned {
			if slices.Contains(assigned, s) {
				kept = append(kept, s)
			} else {
				m.Revoking = addShard(m.Revoking, s)
			}
		}
		m.Owned = kept
	case protocol.StatusRetry:
	case protocol.StatusUnknownMemberID, protocol.StatusFencedMemberEpoch:
		m.Epoch, m.Version = protocol.EpochJoin, 0
		m.Owned, m.Revoking = []int{}, []int{}
	}
}

// ackRevokes drops revoking shards the coordinator has now seen as terminal.
func (m *Member) ackRevokes(req protocol.HeartbeatRequest) {
	if m.HoldRevokes {
		return
	}
	for _, r := range req.RevokingShards {
		if r.Terminal() {
			m.Revoking = slices.DeleteFunc(m.Revoking, func(s int) bool { return s == r.Shard.ShardIndex })
		}
	}
}

func addShard(set []int, s int) []int {
	if slices.Contains(set, s) {
		return set
	}
	set = append(set, s)
	slices.Sort(set)
	return set
}

// CheckNoOverlap fails the test when two members read one shard, or one
// reads a shard another is still revoking: the safety guarantee.
func CheckNoOverlap(t testing.TB, members ...*Member) {
	t.Helper()
	holder := map[int]string{}
	for _, m := range members {
		for _, s := range m.Owned {
			if other, ok := holder[s]; ok {
				t.Fatalf("shard %d read by %s and held by %s at once", s, m.ID, other)
			}
			holder[s] = m.ID
		}
	}
	for _, m := range members {
		for _, s := range m.Revoking {
			if other, ok := holder[s]; ok && other != m.ID {
				t.Fatalf("shard %d read by %s while %s still revokes it", s, other, m.ID)
			}
		}
	}
}

// Converge heartbeats every member in turn until all answer OK with no
// pending shards and nothing revoking, checking overlap after every beat.
// It returns the rounds taken and fails after maxRounds.
func Converge(t testing.TB, s *Server, maxRounds int, members ...*Member) int {
	t.Helper()
	for round := 1; round <= maxRounds; round++ {
		done := true
		for _, m := range members {
			reported := slices.Clone(m.Owned)
			resp := m.Beat(s)
			CheckNoOverlap(t, members...)
			// Settled: the answer is OK, nothing is pending or revoking, and
			// the coordinator already knew the member reads what it grants.
			if resp.Status != protocol.StatusOK || len(resp.Assignment.PendingShards) > 0 || len(m.Revoking) > 0 ||
				!slices.Equal(reported, m.Owned) {
				done = false
			}
		}
		if done {
			return round
		}
	}
	t.Fatalf("members did not converge in %d rounds: %s", maxRounds, describe(members))
	return 0
}

func describe(members []*Member) string {
	out := ""
	for _, m := range members {
		out += fmt.Sprintf("\n  %s epoch=%d owned=%v revoking=%v last=%s pending=%v",
			m.ID, m.Epoch, m.Owned, m.Revoking, m.Last.Status, protocol.Indexes(m.Last.Assignment.PendingShards))
	}
	return out
}
