package assign

import "time"

// Tombstone is what a deleted group leaves behind so that a group registered
// again under its name continues above it (docs/protocol.md, monotonic
// versions): metadataVersion, groupEpoch and every shard's owner epoch never
// go back, or a producer holding the old version and a downstream store
// holding an old fencing token would trust the new group's smaller numbers
// less than stale ones. The store keeps it per (stream prefix, group name)
// until the group is registered again.
type Tombstone struct {
	StreamPrefix string
	Name         string
	// GroupEpoch, AssignmentEpoch and MetadataVersion are the deleted
	// group's last values.
	GroupEpoch      int64
	AssignmentEpoch int64
	MetadataVersion int64
	// OwnerEpochs are the deleted group's owner epochs (see
	// [Group.OwnerEpochs]).
	OwnerEpochs []int64
	// DeletedAt is when the group was deleted.
	DeletedAt time.Time
}

// NewTombstone returns the tombstone g leaves when it is deleted at now.
func NewTombstone(g *Group, now time.Time) Tombstone {
	return Tombstone{
		StreamPrefix:    g.StreamPrefix,
		Name:            g.Name,
		GroupEpoch:      g.GroupEpoch,
		AssignmentEpoch: g.AssignmentEpoch,
		MetadataVersion: g.MetadataVersion,
		OwnerEpochs:     append([]int64(nil), g.OwnerEpochs...),
		DeletedAt:       now,
	}
}

// NewGroupAfter is [NewGroup] for a name that carries tombstone t (nil: no
// tombstone, exactly NewGroup): the new group's GroupEpoch,
// AssignmentEpoch, MetadataVersion and owner epochs start above t's, so no
// number the deleted group ever answered is issued again.
func NewGroupAfter(t *Tombstone, streamPrefix, name string, shardCount int, now time.Time) *Group {
	g := NewGroup(streamPrefix, name, shardCount, now)
	if t == nil {
		return g
	}
	g.GroupEpoch = t.GroupEpoch
	g.AssignmentEpoch = t.AssignmentEpoch
	g.MetadataVersion = max(g.MetadataVersion, t.MetadataVersion+1)
	g.OwnerEpochs = append([]int64(nil), t.OwnerEpochs...)
	return g
}
