package assign

import (
	"cmp"
	"slices"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Views for the monitoring endpoints. They copy out of the group (no caller
// can reach the group's slices through them), list members by id and shards
// in order, and never return nil slices or maps: clients crash on null.

// Summary describes the group (GroupResponse): target and current shard
// counts per member, and the active migration.
func (g *Group) Summary() protocol.GroupResponse {
	targets := make(map[string]int, len(g.Target))
	for id, t := range g.Target {
		targets[id] = len(t)
	}
	current := map[string]int{}
	for id, m := range g.Members {
		if m.State.Owning() {
			current[id] = len(m.Current)
		}
	}
	var migration *protocol.Migration
	if g.ActiveMigration != nil {
		c := *g.ActiveMigration
		migration = &c
	}
	state := g.State
	if state == "" {
		state = protocol.GroupEmpty
	}
	return protocol.GroupResponse{
		StreamPrefix:             g.StreamPrefix,
		ConsumerGroup:            g.Name,
		State:                    state,
		GroupEpoch:               g.GroupEpoch,
		AssignmentEpoch:          g.AssignmentEpoch,
		MetadataVersion:          g.MetadataVersion,
		ShardCount:               g.ShardCount,
		ActiveMigration:          migration,
		TargetAssignmentSummary:  targets,
		CurrentAssignmentSummary: current,
	}
}

// MemberViews lists every member, terminal ones included until pruned,
// sorted by id. A LEAVING member shows memberEpoch -1, as it was answered.
func (g *Group) MemberViews(cfg Config) []protocol.Member {
	cfg = cfg.EnsureDefaults()
	out := make([]protocol.Member, 0, len(g.Members))
	for _, id := range sortedIDs(g.Members) {
		m := g.Members[id]
		epoch := m.Epoch
		if m.State == protocol.MemberLeaving {
			epoch = protocol.EpochLeave
		}
		out = append(out, protocol.Member{
			MemberID:              m.ID,
			MemberName:            m.Name,
			State:                 m.State,
			MemberEpoch:           epoch,
			MetadataVersion:       m.MetadataVersion,
			RuntimeMaxConcurrency: m.MaxConcurrency,
			ActiveConsumerWorkers: max(0, m.MaxConcurrency-m.AvailableConcurrency),
			CurrentAssignment:     toWire(m.Current),
			GrantedAssignment:     toWire(m.Granted),
			Revoking:              toWire(m.Revoking),
			LastHeartbeatAt:       timePtr(m.LastHeartbeat),
			MemberLeaseExpiresAt:  timePtr(m.LeaseExpiresAt),
			RebalanceTimeoutMs:    millis(cfg.RebalanceTimeout),
			RebalanceDeadlineAt:   timePtr(m.RebalanceDeadline),
			ShardProgress:         sortedProgress(m.Progress),
			InstanceID:            m.InstanceID,
		})
	}
	return out
}

// Assignments describes who should hold what and who does: the target,
// every owning member's current set, every member's revoking set when not
// empty, and the invariant violations (none when healthy).
func (g *Group) Assignments() protocol.AssignmentsResponse {
	target := make(map[string][]protocol.Shard, len(g.Target))
	for id, t := range g.Target {
		target[id] = toWire(t)
	}
	current := map[string][]protocol.Shard{}
	revoking := map[string][]protocol.Shard{}
	for id, m := range g.Members {
		// A fenced or expired member still holding shards is shown: it may
		// be reading them until its lease lapses.
		if !m.State.Owning() && !holds(m) {
			continue
		}
		cur := toWire(m.Current)
		for i := range cur {
			if s := cur[i].ShardIndex; contains(m.Granted, s) && s < len(g.OwnerEpochs) {
				cur[i].OwnerEpoch = g.OwnerEpochs[s]
			}
		}
		current[id] = cur
		if len(m.Revoking) > 0 {
			revoking[id] = toWire(m.Revoking)
		}
	}
	owners := []protocol.Shard{}
	for s, e := range g.OwnerEpochs {
		if e > 0 {
			owners = append(owners, protocol.Shard{ShardIndex: s, OwnerEpoch: e})
		}
	}
	return protocol.AssignmentsResponse{
		TargetAssignment:    target,
		CurrentAssignments:  current,
		RevokeProgress:      revoking,
		InvariantViolations: CheckInvariants(g),
		OwnerEpochs:         owners,
	}
}

// Consumption lists the last reported progress of every member on every
// shard, by member id then shard. Progress is not durable: after a restart
// it is empty until members heartbeat.
func (g *Group) Consumption() []protocol.ConsumptionRow {
	out := []protocol.ConsumptionRow{}
	for _, id := range sortedIDs(g.Members) {
		m := g.Members[id]
		for _, p := range sortedProgress(m.Progress) {
			key := p.StreamKey
			if key == "" {
				key = protocol.StreamKey(g.StreamPrefix, p.Shard.ShardIndex)
			}
			out = append(out, protocol.ConsumptionRow{
				StreamPrefix:    g.StreamPrefix,
				ConsumerGroup:   g.Name,
				MemberID:        m.ID,
				MemberName:      m.Name,
				MemberState:     m.State,
				Shard:           p.Shard,
				StreamKey:       key,
				LastDeliveredID: p.LastDeliveredID,
				LastAckedID:     p.LastAckedID,
				PendingCount:    p.PendingCount,
				UpdatedAt:       p.UpdatedAt,
			})
		}
	}
	return out
}

// HoldingMembers counts the members that are live or still hold, drain
// or were granted shards (a LEAVING member draining, a FENCED or EXPIRED
// one whose last lease has not lapsed): while there is one, deleting the
// group without force is refused (docs/protocol.md, monotonic versions).
func (g *Group) HoldingMembers() int {
	n := 0
	for _, m := range g.Members {
		if m.State.Live() || holds(m) {
			n++
		}
	}
	return n
}

// ShardHolders names, for each of shards, the members that read it or may
// start to: a live member whose target, current, granted or revoking set
// has it, and any other member still holding it (a FENCED or EXPIRED one
// whose lease has not lapsed, a LEAVING one draining). Sorted by id; a
// shard nobody holds is absent.
func (g *Group) ShardHolders(shards []int) map[int][]string {
	out := map[int][]string{}
	for _, m := range g.Members {
		sets := [][]int{m.Current, m.Granted, m.Revoking}
		if m.State.Live() {
			sets = append(sets, g.Target[m.ID])
		}
		for _, s := range shards {
			for _, set := range sets {
				if contains(set, s) {
					out[s] = append(out[s], m.ID)
					break
				}
			}
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// LiveMembers counts ACTIVE and STARTING members (for DELETE's
// GROUP_HAS_ACTIVE_MEMBERS and metrics).
func (g *Group) LiveMembers() int {
	n := 0
	for _, m := range g.Members {
		if m.State.Live() {
			n++
		}
	}
	return n
}

func sortedProgress(ps []protocol.ShardProgress) []protocol.ShardProgress {
	out := slices.Clone(ps)
	if out == nil {
		out = []protocol.ShardProgress{}
	}
	slices.SortStableFunc(out, func(a, b protocol.ShardProgress) int {
		return cmp.Compare(a.Shard.ShardIndex, b.Shard.ShardIndex)
	})
	return out
}

// timePtr is nil for the zero time (JSON null: "never"), else t in UTC as
// the protocol's RFC 3339 times are.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
