package refimport

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rscoord/rscoord/client/protocol"
)

// maxShards is rscoord's largest shard count per stream.
const maxShards = 100_000

// supportedSchema is the reference's group record schema this import
// reads.
const supportedSchema = 1

// Existing is what rscoord holds already.
type Existing struct {
	// Streams maps each stream prefix to its shard count.
	Streams map[string]int
	// Groups holds every group, by stream prefix and name.
	Groups map[[2]string]bool
	// Highest holds, by stream prefix and name, the highest of each
	// group's groupEpoch, assignmentEpoch and metadataVersion.
	Highest map[[2]string]int64
}

// Action is one group to create on rscoord (with its stream, when the
// stream is missing), or one found there already.
type Action struct {
	StreamPrefix  string
	ConsumerGroup string
	// ShardCount is the stream's shard count: initialShardCount of the
	// create, which applies when it creates the stream.
	ShardCount int
	// Exists: rscoord holds the group already; nothing to do.
	Exists bool
	// ReferenceMetadataVersion and ReferenceGroupEpoch are the reference
	// group's, for the operator (see the runbook in docs/operations.md).
	ReferenceMetadataVersion int64
	ReferenceGroupEpoch      int64
	// VersionFloor is the create's versionFloor: the highest epoch or
	// version the reference answered for the group or one of its members
	// carries ([Group.Highest]). rscoord starts the group above it.
	VersionFloor int64
	// Note says what the operator should know, e.g. that a scale-out in
	// flight is imported at its target count.
	Note string
}

// Refusal is a stream the import leaves alone, and why.
type Refusal struct {
	StreamPrefix string
	Reason       string
}

// Plan is what an import does.
type Plan struct {
	Actions  []Action
	Refusals []Refusal
}

// inFlight reports whether a migration in state is not finished.
func inFlight(state string) bool {
	switch state {
	case "DEPRECATED", "ROLLED_BACK":
		return false
	}
	return true
}

// NewPlan maps the reference's groups onto rscoord. rscoord keeps one
// shard count per stream, so every group of a stream must agree on it. A
// migration in flight is imported only when that is safe: a scale-out
// that is ACTIVE or DRAINING keeps every old shard among the new ones, so
// the stream is imported at the target count and no record is stranded.
// Any other migration in flight (PREPARING, ROLLING_BACK, or a scale-in
// whose removed shards may still hold records) refuses the stream until
// the operator finishes it on the reference.
func NewPlan(groups []Group, existing Existing) Plan {
	byStream := map[string][]Group{}
	var prefixes []string
	for _, g := range groups {
		if _, ok := byStream[g.StreamPrefix]; !ok {
			prefixes = append(prefixes, g.StreamPrefix)
		}
		byStream[g.StreamPrefix] = append(byStream[g.StreamPrefix], g)
	}
	sort.Strings(prefixes)
	var plan Plan
	for _, prefix := range prefixes {
		actions, reason := planStream(prefix, byStream[prefix], existing)
		if reason != "" {
			plan.Refusals = append(plan.Refusals, Refusal{StreamPrefix: prefix, Reason: reason})
			continue
		}
		plan.Actions = append(plan.Actions, actions...)
	}
	return plan
}

func planStream(prefix string, groups []Group, existing Existing) ([]Action, string) {
	if err := protocol.ValidateStreamPrefix(prefix); err != nil {
		return nil, err.Error()
	}
	counts := map[int][]string{}
	notes := map[string]string{}
	for _, g := range groups {
		if err := protocol.ValidateConsumerGroup(g.ConsumerGroup); err != nil {
			return nil, fmt.Sprintf("group %q: %v", g.ConsumerGroup, err)
		}
		if h := g.Highest(); h > protocol.MaxVersionFloor {
			return nil, fmt.Sprintf("group %s has epoch or version %d; rscoord starts groups above at most %d", g.ConsumerGroup, h, protocol.MaxVersionFloor)
		}
		if g.SchemaVersion != supportedSchema {
			return nil, fmt.Sprintf("group %s is of the reference's schemaVersion %d; this import reads %d", g.ConsumerGroup, g.SchemaVersion, supportedSchema)
		}
		count := g.ShardCount
		for _, m := range g.Migrations {
			if !inFlight(m.State) {
				continue
			}
			if (m.State == "ACTIVE" || m.State == "DRAINING") && m.ToShardCount > m.FromShardCount && m.FromShardCount > 0 {
				count = m.ToShardCount
				notes[g.ConsumerGroup] = fmt.Sprintf("scale-out %s (%d→%d, %s) in flight: imported at %d shards, every old shard among them",
					m.ID, m.FromShardCount, m.ToShardCount, m.State, m.ToShardCount)
				continue
			}
			return nil, fmt.Sprintf("group %s has migration %s (%d→%d, %s) in flight: finish it or roll it back on the reference, then import again",
				g.ConsumerGroup, m.ID, m.FromShardCount, m.ToShardCount, m.State)
		}
		if count < 1 || count > maxShards {
			return nil, fmt.Sprintf("group %s has %d shards; rscoord takes 1 to %d", g.ConsumerGroup, count, maxShards)
		}
		counts[count] = append(counts[count], g.ConsumerGroup)
	}
	if len(counts) > 1 {
		var parts []string
		for n, gs := range counts {
			parts = append(parts, fmt.Sprintf("%d (%s)", n, strings.Join(gs, ", ")))
		}
		sort.Strings(parts)
		return nil, "its groups disagree on the shard count: " + strings.Join(parts, ", ") +
			"; rscoord keeps one count per stream: scale them to one count on the reference first"
	}
	var count int
	for n := range counts {
		count = n
	}
	if have, ok := existing.Streams[prefix]; ok && have != count {
		return nil, fmt.Sprintf("rscoord has this stream with %d shards, the reference %d: scale one of them first", have, count)
	}
	out := make([]Action, 0, len(groups))
	for _, g := range groups {
		id := [2]string{prefix, g.ConsumerGroup}
		a := Action{StreamPrefix: prefix, ConsumerGroup: g.ConsumerGroup, ShardCount: count,
			Exists: existing.Groups[id], ReferenceMetadataVersion: g.MetadataVersion,
			ReferenceGroupEpoch: g.GroupEpoch, VersionFloor: g.Highest(), Note: notes[g.ConsumerGroup]}
		if have, ok := existing.Highest[id]; a.Exists && ok && have <= a.VersionFloor {
			// Created before, without the floor: the reference's members
			// may carry numbers ahead of it.
			a.Note = fmt.Sprintf("rscoord's group is at %d, not above the reference's %d: start the reference's members again as new processes", have, a.VersionFloor)
		}
		out = append(out, a)
	}
	return out, ""
}
