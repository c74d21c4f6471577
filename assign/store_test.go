package assign

import (
	"slices"
)

// simStore is what a coordinator has written of one group, part by part as
// [Changes] names them and as the group actor writes them: the group-level
// part when Changes.Group, each listed member's record (its durable fields
// and its target), each listed owner epoch; removed members deleted. A
// crash of the coordinator loses everything else — leases, progress, and
// the epoch catch-ups no call listed (catchUp) — and the group is built
// again from this, as the store's load does.
type simStore struct {
	head    Group // the group-level part; Members, Target and OwnerEpochs unused
	members map[string]Member
	targets map[string][]int
	owners  []int64
}

// newSimStore writes every part of g (a new group, as the actor writes it
// when it registers one).
func newSimStore(g *Group) *simStore {
	s := &simStore{members: map[string]Member{}, targets: map[string][]int{}}
	s.writeAll(g)
	return s
}

// writeAll writes every part of g (a layout change: the actor writes every
// member).
func (s *simStore) writeAll(g *Group) {
	c := Changes{Group: true}
	for id := range g.Members {
		c.Members = append(c.Members, id)
	}
	for id := range s.members {
		if g.Members[id] == nil {
			c.Removed = append(c.Removed, id)
		}
	}
	for i := range g.OwnerEpochs {
		c.OwnerEpochs = append(c.OwnerEpochs, i)
	}
	s.write(g, c)
}

// write writes the parts c names. It returns the members whose stored
// epoch went back, which must never happen.
func (s *simStore) write(g *Group, c Changes) []string {
	if c.Group {
		s.head = Group{
			StreamPrefix: g.StreamPrefix, Name: g.Name, State: g.State,
			GroupEpoch: g.GroupEpoch, AssignmentEpoch: g.AssignmentEpoch, MetadataVersion: g.MetadataVersion,
			ShardCount: g.ShardCount, DrainingShards: slices.Clone(g.DrainingShards),
			CorrectionOpen: g.CorrectionOpen, ActiveMigration: g.ActiveMigration, CreatedAt: g.CreatedAt,
		}
	}
	var back []string
	for _, id := range c.Members {
		m := g.Members[id]
		if m == nil {
			delete(s.members, id)
			delete(s.targets, id)
			continue
		}
		if old, ok := s.members[id]; ok && m.Epoch < old.Epoch {
			back = append(back, id)
		}
		// The durable fields only, as the store's record has them.
		s.members[id] = Member{
			ID: m.ID, Name: m.Name, State: m.State, Epoch: m.Epoch, PreviousEpoch: m.PreviousEpoch,
			Current: slices.Clone(m.Current), Revoking: slices.Clone(m.Revoking), Granted: slices.Clone(m.Granted),
			Withdrawn: slices.Clone(m.Withdrawn), JoinVersion: m.JoinVersion, JoinSeq: m.JoinSeq, Reported: m.Reported, JoinedAt: m.JoinedAt, RebalanceDeadline: m.RebalanceDeadline,
			StateChangedAt: m.StateChangedAt, InstanceID: m.InstanceID, JoinRequestID: m.JoinRequestID,
		}
		if t, ok := g.Target[id]; ok {
			s.targets[id] = slices.Clone(t)
		} else {
			delete(s.targets, id)
		}
	}
	for _, id := range c.Removed {
		delete(s.members, id)
		delete(s.targets, id)
	}
	for _, sh := range c.OwnerEpochs {
		if sh >= len(s.owners) {
			s.owners = append(s.owners, make([]int64, sh+1-len(s.owners))...)
		}
		if sh < len(g.OwnerEpochs) {
			s.owners[sh] = g.OwnerEpochs[sh]
		}
	}
	return back
}

// clone is a copy of what s holds: a snapshot of the store.
func (s *simStore) clone() *simStore {
	c := &simStore{head: s.head, members: make(map[string]Member, len(s.members)), targets: make(map[string][]int, len(s.targets)),
		owners: slices.Clone(s.owners)}
	c.head.DrainingShards = slices.Clone(s.head.DrainingShards)
	for id, m := range s.members {
		m.Current, m.Revoking, m.Granted = slices.Clone(m.Current), slices.Clone(m.Revoking), slices.Clone(m.Granted)
		m.Withdrawn = slices.Clone(m.Withdrawn)
		c.members[id] = m
	}
	for id, t := range s.targets {
		c.targets[id] = slices.Clone(t)
	}
	return c
}

// load builds the group from what was written, as a fresh coordinator
// does; the caller then runs [Restore].
func (s *simStore) load() *Group {
	g := s.head
	g.DrainingShards = slices.Clone(s.head.DrainingShards)
	g.Members = make(map[string]*Member, len(s.members))
	g.Target = make(map[string][]int, len(s.targets))
	for id, m := range s.members {
		m.Current, m.Revoking, m.Granted = slices.Clone(m.Current), slices.Clone(m.Revoking), slices.Clone(m.Granted)
		g.Members[id] = &m
	}
	for id, t := range s.targets {
		g.Target[id] = slices.Clone(t)
	}
	g.OwnerEpochs = slices.Clone(s.owners)
	return &g
}
