package assign

import (
	"github.com/rscoord/rscoord/client/protocol"
)

// Unchanged reports whether answering resp's member now would tell it
// nothing it needs beyond resp, an OK answer computed earlier and not sent
// yet: the same status and member epoch, the same readable shards
// (target − blocked) and the same pending shards. The group actor holds
// answers of heartbeats that carry waitMs (docs/protocol.md §9.5) and asks
// this after every change of the group, to send a held answer, computed
// afresh, as soon as it would say something new.
//
// A new assignment epoch or metadata version alone does not count: every
// join and leave moves both for the whole group, so counting them would
// release every held answer of a group at each membership change (a
// thundering herd that grows with the group), while a member whose shards
// stay the same loses nothing by learning the new values when its wait
// ends. Its epoch does not move until it is answered, so its next
// heartbeat is current (docs/protocol-notes.md, held heartbeats).
//
// It does not change g (it may fill the derived blocked-set cache) and
// costs O(the member's shards) once the cache is built.
func Unchanged(g *Group, resp *protocol.HeartbeatResponse) bool {
	if resp.Status != protocol.StatusOK || g.CorrectionOpen {
		return false
	}
	m := g.Members[resp.MemberID]
	if m == nil || !m.State.Live() || m.Epoch != resp.MemberEpoch {
		return false
	}
	o := &op{g: g}
	assigned := o.assignable(m)
	if !sameAsWire(assigned, resp.Assignment.AssignedShards) {
		return false
	}
	target := g.Target[m.ID]
	if len(target) != len(assigned)+len(resp.Assignment.PendingShards) {
		return false
	}
	if len(resp.Assignment.PendingShards) == 0 {
		return true // assigned ⊆ target, and as many: the same set
	}
	return sameAsWire(minus(target, assigned), resp.Assignment.PendingShards)
}
