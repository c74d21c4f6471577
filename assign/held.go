package assign

import (
	"github.com/rscoord/rscoord/client/protocol"
)

// Unchanged reports whether answering resp's member now would tell it
// nothing beyond resp, an OK answer computed earlier and not sent yet: the
// same status, epoch and metadata version, and the same readable shards
// (target − blocked). The group actor holds answers of heartbeats that
// carry waitMs (docs/protocol.md §9.5) and asks this after every change of the
// group, to send a held answer, computed afresh, as soon as it would say
// something new.
//
// It does not change g (it may fill the derived blocked-set cache) and
// costs O(the member's shards) once the cache is built. A new target
// always comes with a new assignment epoch, so pending shards cannot
// change while the epoch and the readable shards stay the same.
func Unchanged(g *Group, resp *protocol.HeartbeatResponse) bool {
	if resp.Status != protocol.StatusOK || g.CorrectionOpen ||
		g.AssignmentEpoch != resp.MemberEpoch || g.MetadataVersion != resp.MetadataVersion {
		return false
	}
	m := g.Members[resp.MemberID]
	if m == nil || !m.State.Live() || m.Epoch != resp.MemberEpoch {
		return false
	}
	o := &op{g: g}
	return sameAsWire(o.assignable(m), resp.Assignment.AssignedShards)
}
