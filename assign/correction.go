package assign

import (
	"math"

	"github.com/rscoord/rscoord/client/protocol"
)

// Metadata correction (docs/protocol.md §6.1 steps 4 and 9).
//
// A member reporting a metadataVersion above the group's has seen a state
// this coordinator no longer has: the store went back (a restore, a lost
// write). The coordinator never rebuilds its state from such a report; it
// opens a correction round in which nobody starts reading anything, each
// member keeps only what it already reads and may still read here, and the
// round closes once every member has heartbeated at the group's version and
// nothing is blocked. Then OK answers resume and hand out the rest.
//
// Two choices of ours:
//
//   - Opening the round moves MetadataVersion past the reported one (to
//     reported+1). Otherwise the next ordinary bump would reissue the very
//     version number the lost state had, and a member still holding that
//     lost view would look in sync. With the jump every member that saw
//     the lost state reports a different version and is answered
//     SYNC_METADATA.
//   - What a synced member still holds beyond what it may keep is recorded
//     as revoking (only readable shards and shards it was accepted for), so
//     that it blocks others until the member reports it released. That is
//     the safe direction: it delays a hand-off, it never grants anything.

// A report above the group's version is believed only as far as a lost
// history could have reached. The store loses only the writes after the
// backup it was restored from (or its last durable write), and every
// version the group answers is written first; so versions nobody here
// issued can only come from before this process loaded the group. That
// history is bounded by Config.MaxCorrectionStep past the version loaded:
// correctionCap. Once a correction moved the group there, later reports
// above it move nothing: a member no longer pushes the version up by a
// whole step with each heartbeat, only once per load, however often it
// reports. Versions the group issues itself are never above its own.

// withinCorrection reports whether a positive-epoch report of version v,
// above the group's version, is one a lost history could have issued: at
// most correctionCap, or, before the cap is set (a group no Restore
// prepared, nor corrected yet), at most one step past the group's version.
func withinCorrection(g *Group, v int64, cfg Config) bool {
	if g.correctionCap > 0 {
		return v <= g.correctionCap
	}
	return v-g.MetadataVersion <= cfg.MaxCorrectionStep
}

// capAfter is version plus step, at most the largest version.
func capAfter(version, step int64) int64 {
	if version > math.MaxInt64-step {
		return math.MaxInt64
	}
	return version + step
}

// needsSync reports whether a heartbeat of live member m with a positive
// epoch is answered SYNC_METADATA.
func needsSync(g *Group, m *Member, req *protocol.HeartbeatRequest) bool {
	if m == nil || !m.State.Live() || req.MemberEpoch <= 0 {
		return false
	}
	return req.MetadataVersion > g.MetadataVersion ||
		(g.CorrectionOpen && req.MetadataVersion != g.MetadataVersion)
}

// syncMetadata opens or extends the correction round and records what m may
// keep. Epoch checks are skipped on purpose: the member may carry an epoch
// this coordinator never issued (it was lost with the state), and it keeps
// its stored epoch.
func (o *op) syncMetadata(m *Member, req *protocol.HeartbeatRequest) answer {
	g := o.g
	if req.MetadataVersion > g.MetadataVersion {
		if g.correctionCap == 0 {
			g.correctionCap = capAfter(g.MetadataVersion, o.cfg.MaxCorrectionStep)
		}
		g.MetadataVersion = req.MetadataVersion + 1
		o.groupChange()
	}
	if !g.CorrectionOpen {
		g.CorrectionOpen = true
		o.groupChange()
	}
	return o.syncMember(m, req)
}

// syncMember answers m SYNC_METADATA and records what it may keep, as
// syncMetadata does, without touching the group's version or round.
func (o *op) syncMember(m *Member, req *protocol.HeartbeatRequest) answer {
	g := o.g
	owned := fromWire(req.OwnedShards)
	held := union(owned, nonTerminal(req.RevokingShards))
	var plausible []int
	for _, s := range held {
		if readable(g, s) || contains(m.Current, s) || contains(m.Revoking, s) || contains(m.Granted, s) {
			plausible = append(plausible, s)
		}
	}
	keep := intersect(owned, o.assignable(m))
	// What it held and leaves out stays held unless the report proves it
	// released (withdrawn.go); a granted shard it does not report may be
	// read by now, as the report may be older than the grant.
	kept := union(unproven(m, req, owned, held), minus(m.Granted, held))
	o.setCurrent(m, keep)
	o.setRevoking(m, union(minus(plausible, keep), minus(kept, keep)))
	o.setGranted(m, keep)
	o.keepWithdrawn(m)
	if m.Name != req.MemberName {
		m.Name = req.MemberName
		o.memberChanged(m)
	}
	if !m.Reported {
		m.Reported = true
		o.memberChanged(m)
	}
	o.recordLiveness(m, req)
	o.recordProgress(m, req.ShardProgress, true)
	m.MetadataVersion = req.MetadataVersion
	return answerSync
}

// closeRound closes the correction round once every live member, and every
// LEAVING member still holding or revoking shards, has heartbeated at the
// group's version and nothing is blocked. A drained LEAVING member that
// never heartbeats again does not hold the round open.
func (o *op) closeRound() {
	g := o.g
	if !g.CorrectionOpen {
		return
	}
	for _, m := range g.Members {
		waits := m.State.Live() ||
			(m.State == protocol.MemberLeaving && len(m.Current)+len(m.Revoking) > 0)
		if waits && m.MetadataVersion != g.MetadataVersion {
			return
		}
	}
	if g.index().blocked > 0 {
		return
	}
	g.CorrectionOpen = false
	o.groupChange()
}
