package coordfake

import (
	"slices"
	"sort"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// group is one consumer group of the fake: its members, who holds each
// shard, and the assignment it aims for. The Server's mutex guards it.
type group struct {
	shards   int
	epoch    int64 // the group epoch; members' epochs are taken from it
	metadata int64
	members  map[string]*fakeMember
	// holder is the member holding each shard ("" for none): granted to
	// it, and not yet reported REVOKED, left, fenced or expired.
	holder     []string
	ownerEpoch []int64
	// scripted is Assign's assignment, shard → member; nil balances.
	scripted map[int]string
}

type fakeMember struct {
	epoch, prev int64
	lastSeen    time.Time
	assigned    []int
}

func newGroup(shards int) *group {
	return &group{shards: shards, metadata: 1, members: map[string]*fakeMember{},
		holder: make([]string, shards), ownerEpoch: make([]int64, shards)}
}

// expire drops members whose lease lapsed without a heartbeat.
func (g *group) expire(now time.Time, lease time.Duration) {
	for id, m := range g.members {
		if now.Sub(m.lastSeen) > lease {
			g.drop(id)
		}
	}
}

// drop removes a member and frees every shard it holds.
func (g *group) drop(id string) {
	delete(g.members, id)
	for s, h := range g.holder {
		if h == id {
			g.holder[s] = ""
		}
	}
}

func (g *group) memberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// target is the shard → member the group aims for: Assign's, for live
// members, or every shard spread over the members in id order.
func (g *group) target() map[int]string {
	out := map[int]string{}
	if g.scripted != nil {
		for s, m := range g.scripted {
			if g.members[m] != nil && s >= 0 && s < g.shards {
				out[s] = m
			}
		}
		return out
	}
	ids := g.memberIDs()
	if len(ids) == 0 {
		return out
	}
	for s := range g.shards {
		out[s] = ids[s%len(ids)]
	}
	return out
}

// apply decides one heartbeat of a member into resp.
func (g *group) apply(req *protocol.HeartbeatRequest, resp *protocol.HeartbeatResponse, now time.Time) {
	id := req.MemberID
	switch req.MemberEpoch {
	case protocol.EpochLeave:
		g.drop(id)
		resp.Status, resp.MemberEpoch = protocol.StatusOK, protocol.EpochLeave
		resp.GroupEpoch, resp.AssignmentEpoch, resp.MetadataVersion = g.epoch, g.epoch, g.metadata
		resp.Assignment = protocol.EmptyAssignment(g.metadata)
		return
	case protocol.EpochJoin:
		// No incarnation checks: a join frees what the member held.
		g.drop(id)
		g.epoch++
		g.members[id] = &fakeMember{epoch: g.epoch}
	}
	m := g.members[id]
	switch {
	case m == nil:
		resp.Status = protocol.StatusUnknownMemberID
		return
	case req.MemberEpoch != protocol.EpochJoin && req.MemberEpoch != m.epoch && req.MemberEpoch != m.prev:
		g.drop(id)
		resp.Status = protocol.StatusFencedMemberEpoch
		return
	}
	m.lastSeen = now
	for _, r := range req.RevokingShards {
		if s := r.Shard.ShardIndex; r.Terminal() && s >= 0 && s < g.shards && g.holder[s] == id {
			g.holder[s] = ""
		}
	}
	target := g.target()
	var assigned, pending []protocol.Shard
	var indexes []int
	for s := range g.shards {
		if target[s] != id {
			continue // a shard held and no longer targeted is revoked by leaving it out
		}
		if g.holder[s] == "" {
			g.holder[s] = id
			g.ownerEpoch[s]++
		}
		if g.holder[s] == id {
			assigned = append(assigned, protocol.Shard{ShardIndex: s, OwnerEpoch: g.ownerEpoch[s]})
			indexes = append(indexes, s)
		} else {
			pending = append(pending, protocol.Shard{ShardIndex: s})
		}
	}
	if !slices.Equal(indexes, m.assigned) {
		g.epoch++
		m.prev, m.epoch, m.assigned = m.epoch, g.epoch, indexes
	}
	resp.Status, resp.MemberEpoch = protocol.StatusOK, m.epoch
	resp.GroupEpoch, resp.AssignmentEpoch, resp.MetadataVersion = g.epoch, g.epoch, g.metadata
	resp.Assignment = protocol.Assignment{AssignedShards: orEmpty(assigned), PendingShards: orEmpty(pending), MetadataVersion: g.metadata}
}

func orEmpty(s []protocol.Shard) []protocol.Shard {
	if s == nil {
		return []protocol.Shard{}
	}
	return s
}
