package actors

import (
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// noteOrigin records where m came from for its member. A steady member
// sends the same address and agent every time: the comparison then costs
// two string compares and writes nothing, to memory or the store.
func (a *groupActor) noteOrigin(m *heartbeatMsg) {
	if m.req == nil || m.origin == (Origin{}) {
		return
	}
	id := m.req.MemberID
	if old, ok := a.origins[id]; ok && old == m.origin {
		return
	}
	if a.origins == nil {
		a.origins = map[string]Origin{}
	}
	a.origins[id] = m.origin
}

// memberViews is the members API's list: the group's view of each member
// with where it runs and whether its heartbeat is late. Origins of
// members pruned since are forgotten here.
func (a *groupActor) memberViews(g *assign.Group) []protocol.Member {
	cfg := a.env.cfg.Group.EnsureDefaults()
	out := g.MemberViews(cfg)
	now := a.env.now()
	for i := range out {
		v := &out[i]
		if o, ok := a.origins[v.MemberID]; ok {
			v.ClientAddress, v.UserAgent = o.Address, o.UserAgent
		}
		v.Late = lateHeartbeat(*v, now, cfg.HeartbeatInterval)
	}
	for id := range a.origins {
		if g.Members[id] == nil {
			delete(a.origins, id)
		}
	}
	return out
}

// lateHeartbeat reports whether live member v last heartbeated more than
// two heartbeat intervals ago while its lease still runs: a warning before
// it expires (once its lease ended it is dead, not late).
func lateHeartbeat(v protocol.Member, now time.Time, interval time.Duration) bool {
	if !v.State.Live() || v.LastHeartbeatAt == nil {
		return false
	}
	if v.MemberLeaseExpiresAt != nil && !now.Before(*v.MemberLeaseExpiresAt) {
		return false
	}
	return now.Sub(*v.LastHeartbeatAt) > 2*interval
}
