package member

import (
	"slices"

	"github.com/rscoord/rscoord/client/protocol"
)

// sanitizeShards turns a shard list of a heartbeat answer into a sorted set
// of shard indexes: sorted, duplicates removed, negative indexes dropped
// (doc.go rule 3).
//
// Why: the runtime starts one read loop per listed shard and keeps "at most
// one read loop per shard" by shard index, so a duplicate must not reach
// it; a negative index names no stream key ("prefix:-1" is a different,
// unmanaged key); and the diff below merges sorted lists. A coordinator
// that follows docs/protocol.md never sends either, but the member is the one
// that would read twice, so it cleans its input at the boundary (as
// franz-go's sanitizePartitions does).
func sanitizeShards(in []protocol.Shard) []int {
	out := make([]int, 0, len(in))
	for _, s := range in {
		if s.ShardIndex >= 0 {
			out = append(out, s.ShardIndex)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// shardDiff is how an assignment differs from what the member owns.
type shardDiff struct {
	// Kept are owned and still assigned.
	Kept []int
	// Added are assigned but not owned: to start.
	Added []int
	// Lost are owned but no longer assigned: to revoke.
	Lost []int
}

// diffShards compares the owned and assigned sets, both sorted and free of
// duplicates. The three results are sorted and never nil.
func diffShards(owned, assigned []int) shardDiff {
	d := shardDiff{Kept: []int{}, Added: []int{}, Lost: []int{}}
	i, j := 0, 0
	for i < len(owned) || j < len(assigned) {
		switch {
		case j == len(assigned) || (i < len(owned) && owned[i] < assigned[j]):
			d.Lost = append(d.Lost, owned[i])
			i++
		case i == len(owned) || assigned[j] < owned[i]:
			d.Added = append(d.Added, assigned[j])
			j++
		default:
			d.Kept = append(d.Kept, owned[i])
			i++
			j++
		}
	}
	return d
}

// plan is what one heartbeat answer asks the member to do, by status
// (docs/protocol.md §6's table). It is pure: the member actor carries it out.
type plan struct {
	// Own is the owned set after the answer: Keep plus Start.
	Own []int
	// Start are shards to start reading (OK only).
	Start []int
	// Revoke are owned shards to stop reading, drain and report REVOKED.
	Revoke []int
	// Renew: the coordinator recorded the heartbeat, so the lease is
	// renewed from when it was sent, and epoch and version are taken.
	Renew bool
	// Resume: reads stopped by an expired lease may start again.
	Resume bool
	// Rejoin: stop reads and ACKs at once, clear ownership, send epoch 0.
	Rejoin bool
	// Fatal: stop and make Run fail.
	Fatal bool
	// Known is false for a status this runtime does not know; it is then
	// treated like RETRY.
	Known bool
}

// planFor decides what a member that owns owned (sorted) does with an
// answer of status that assigned it assigned (sanitized).
func planFor(status protocol.Status, owned, assigned []int) plan {
	p := plan{Own: owned, Start: []int{}, Revoke: []int{}, Known: true}
	switch status {
	case protocol.StatusOK:
		// Own exactly assignedShards: start new ones, revoke missing ones.
		d := diffShards(owned, assigned)
		p.Own, p.Start, p.Revoke = assigned, d.Added, d.Lost
		p.Renew, p.Resume = true, true
	case protocol.StatusSyncMetadata, protocol.StatusRevokePending:
		// Keep only shards already read that are assigned, revoke the
		// rest, start nothing (REVOKE_PENDING: keep owned assigned,
		// keep draining).
		d := diffShards(owned, assigned)
		p.Own, p.Revoke = d.Kept, d.Lost
		p.Renew = true
	case protocol.StatusRetry:
		// Keep ownership, heartbeat again. RETRY does not say the
		// coordinator recorded the heartbeat (it answers RETRY when its
		// store is down), so it does not renew the lease.
	case protocol.StatusUnknownMemberID, protocol.StatusFencedMemberEpoch:
		p.Own, p.Rejoin = []int{}, true
	case protocol.StatusUnsupportedProtocol, protocol.StatusInvalidRequest:
		p.Own, p.Fatal = []int{}, true
	default:
		p.Known = false
	}
	return p
}
