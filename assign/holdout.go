package assign

import (
	"slices"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Held-out shards: a forced offsets reset takes shards out of the
// assignment while it moves the group's last delivered id on them. The
// assignor gives a held-out shard to nobody, so the member holding it sees
// it leave its target and hands it off by the ordinary rule (docs/protocol.md
// §9.1): a REVOKE answer and its release report, or, for a member that does
// not answer, its lease. Fencing alone would not do: a fenced member rejoins
// at once and would get the shard back.
//
// The hold is not durable: a coordinator that restarts forgets it, and the
// reset that asked for it fails with the restart.

// HoldOut sets the shards held out of g's assignment to shards (none
// clears the hold) and reassigns. A change bumps GroupEpoch and
// MetadataVersion, so every member learns its new target; a member holding
// a shard now held out gets a rebalance deadline like any member holding a
// shard outside its target. Setting the same set again changes nothing.
// Shards that are not readable may be named: they are held all the same
// and matter once a layout makes them readable.
func HoldOut(g *Group, shards []int, now time.Time, cfg Config) Result {
	o := begin(g, now, cfg)
	o.allDeadlines = true
	o.fullAssign = true
	held := normalize(shards)
	held = slices.DeleteFunc(held, func(s int) bool { return s < 0 })
	if !slices.Equal(g.heldOut, held) {
		g.heldOut = held
		if len(held) == 0 {
			g.heldOut = nil
		}
		o.bump()
	}
	o.finish()
	return o.result(protocol.HeartbeatResponse{})
}

// HeldOut returns a copy of the shards held out of g's assignment.
func (g *Group) HeldOut() []int {
	return slices.Clone(g.heldOut)
}

// assignableShards returns the sorted shards the assignor may give out:
// the readable ones that are not held out.
func assignableShards(g *Group) []int {
	out := readableShards(g)
	if len(g.heldOut) == 0 {
		return out
	}
	return minus(out, g.heldOut)
}

// HandOffBound is how long, at most, shards held out stay held by their
// members: a live member hears the REVOKE within a heartbeat interval and
// releases within the rebalance timeout, or is fenced then; a member that
// does not answer stops reading when the lease of its last answer lapses.
// One more interval covers the timer that frees the shards.
func (c Config) HandOffBound() time.Duration {
	c = c.EnsureDefaults()
	return 2*c.HeartbeatInterval + c.RebalanceTimeout + c.MemberLease
}
