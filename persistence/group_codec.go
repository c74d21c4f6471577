package persistence

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// The record types of a group's keys and their encoding and decoding.

// groupV2 is the group-level record, schema version 2.
type groupV2 struct {
	StreamPrefix    string       `json:"streamPrefix"`
	Name            string       `json:"name"`
	State           string       `json:"state"`
	GroupEpoch      int64        `json:"groupEpoch"`
	AssignmentEpoch int64        `json:"assignmentEpoch"`
	MetadataVersion int64        `json:"metadataVersion"`
	ShardCount      int          `json:"shardCount"`
	DrainingShards  []int        `json:"drainingShards"`
	CorrectionOpen  bool         `json:"correctionOpen"`
	ActiveMigration *migrationV1 `json:"activeMigration,omitempty"`
	CreatedAt       time.Time    `json:"createdAt,omitzero"`
	// Members and OwnerEpochs count the member keys and owner epochs the
	// group has, so that a load notices a lost part.
	Members     int `json:"members"`
	OwnerEpochs int `json:"ownerEpochs"`
}

// withdrawalV2 is one of a member's withdrawn shards (assign.Withdrawal).
type withdrawalV2 struct {
	Shard   int   `json:"shard"`
	Version int64 `json:"version"`
}

// memberV2 is one member with its target, schema version 2.
type memberV2 struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	State         string `json:"state"`
	Epoch         int64  `json:"epoch"`
	PreviousEpoch int64  `json:"previousEpoch"`
	Current       []int  `json:"current"`
	Revoking      []int  `json:"revoking"`
	Granted       []int  `json:"granted"`
	// Withdrawn is absent when empty, so that records without it read as
	// before.
	Withdrawn []withdrawalV2 `json:"withdrawn,omitempty"`
	// JoinVersion is absent when 0 (unknown: a record written before it).
	JoinVersion int64 `json:"joinVersion,omitempty"`
	// JoinSeq is absent when 0 (none sent, or a record written before it).
	JoinSeq           int64     `json:"joinSeq,omitempty"`
	Reported          bool      `json:"reported"`
	JoinedAt          time.Time `json:"joinedAt,omitzero"`
	RebalanceDeadline time.Time `json:"rebalanceDeadline,omitzero"`
	StateChangedAt    time.Time `json:"stateChangedAt,omitzero"`
	InstanceID        string    `json:"instanceId,omitempty"`
	JoinRequestID     string    `json:"joinRequestId,omitempty"`
	// Target is the member's entry of the group's target; absent when the
	// member has none (only live members are in the target).
	Target *[]int `json:"target,omitempty"`
}

// ownersV2 is one chunk of owner epochs: those of shards First, First+1, …
type ownersV2 struct {
	First  int     `json:"first"`
	Epochs []int64 `json:"epochs"`
}

// tombstoneV2 is what a deleted group leaves under its group key; its owner
// epoch chunks stay in place.
type tombstoneV2 struct {
	StreamPrefix    string    `json:"streamPrefix"`
	Name            string    `json:"name"`
	GroupEpoch      int64     `json:"groupEpoch"`
	AssignmentEpoch int64     `json:"assignmentEpoch"`
	MetadataVersion int64     `json:"metadataVersion"`
	OwnerEpochs     int       `json:"ownerEpochs"`
	DeletedAt       time.Time `json:"deletedAt,omitzero"`
}

// stageV2 is one staged part of a group write: puts and deletes of keys of
// that group.
type stageV2 struct {
	Ops []stagedOp `json:"ops"`
}

type stagedOp struct {
	Key   []byte `json:"k"`
	Value []byte `json:"v,omitempty"`
	Del   bool   `json:"d,omitempty"`
}

func encodeGroupHead(g *assign.Group) ([]byte, error) {
	rec := groupV2{
		StreamPrefix:    g.StreamPrefix,
		Name:            g.Name,
		State:           string(g.State),
		GroupEpoch:      g.GroupEpoch,
		AssignmentEpoch: g.AssignmentEpoch,
		MetadataVersion: g.MetadataVersion,
		ShardCount:      g.ShardCount,
		DrainingShards:  cleanShards(g.DrainingShards),
		CorrectionOpen:  g.CorrectionOpen,
		CreatedAt:       utc(g.CreatedAt),
		Members:         len(g.Members),
		OwnerEpochs:     len(g.OwnerEpochs),
	}
	if m := g.ActiveMigration; m != nil {
		rec.ActiveMigration = &migrationV1{
			ReshardingID: m.ReshardingID, FromShardCount: m.FromShardCount, ToShardCount: m.ToShardCount,
			State: string(m.State), CreatedAt: utc(m.CreatedAt), UpdatedAt: utc(m.UpdatedAt),
		}
	}
	return json.Marshal(rec)
}

func encodeMember(m *assign.Member, target []int, inTarget bool) ([]byte, error) {
	rec := memberV2{
		ID:                m.ID,
		Name:              m.Name,
		State:             string(m.State),
		Epoch:             m.Epoch,
		PreviousEpoch:     m.PreviousEpoch,
		Current:           cleanShards(m.Current),
		Revoking:          cleanShards(m.Revoking),
		Granted:           cleanShards(m.Granted),
		Withdrawn:         encodeWithdrawn(m.Withdrawn),
		JoinVersion:       m.JoinVersion,
		JoinSeq:           m.JoinSeq,
		Reported:          m.Reported,
		JoinedAt:          utc(m.JoinedAt),
		RebalanceDeadline: utc(m.RebalanceDeadline),
		StateChangedAt:    utc(m.StateChangedAt),
		InstanceID:        m.InstanceID,
		JoinRequestID:     m.JoinRequestID,
	}
	if inTarget {
		t := cleanShards(target)
		rec.Target = &t
	}
	return json.Marshal(rec)
}

func encodeOwners(epochs []int64, chunk uint32) ([]byte, error) {
	first := int(chunk) * ownerChunk
	end := min(first+ownerChunk, len(epochs))
	if first >= end {
		return nil, fmt.Errorf("persistence: owner-epoch chunk %d beyond %d shards", chunk, len(epochs))
	}
	return json.Marshal(ownersV2{First: first, Epochs: epochs[first:end]})
}

func decodeStage(v []byte, rev uint64) ([]op, error) {
	env, err := unframe(v, kindStage)
	if err != nil {
		return nil, err
	}
	if env.StoreRevision != rev {
		return nil, newErr(ErrCorrupt, "staged write of revision %d under revision %d", env.StoreRevision, rev)
	}
	var s stageV2
	if err := strictUnmarshal(env.Payload, &s); err != nil {
		return nil, newErr(ErrCorrupt, "staged write: %v", err)
	}
	ops := make([]op, 0, len(s.Ops))
	for _, o := range s.Ops {
		if o.Del {
			ops = append(ops, delOp(o.Key))
		} else {
			ops = append(ops, putOp(o.Key, o.Value))
		}
	}
	return ops, nil
}

// decodeGroupKeys decodes one group read by readGroups. tomb is set instead
// of rec when the group key holds a tombstone.
func decodeGroupKeys(gk *groupKeys) (rec GroupRecord, tomb *assign.Tombstone) {
	g, tomb, rev, err := decodeGroupParts(gk)
	if err != nil {
		return GroupRecord{StreamPrefix: gk.prefix, Name: gk.name, Err: opErr("group "+gk.prefix+"/"+gk.name, err)}, nil
	}
	if tomb != nil {
		// The tombstone's revision only: callers forget what they cached
		// of the group before the delete (observeTombstone).
		return GroupRecord{Revision: rev}, tomb
	}
	return GroupRecord{StreamPrefix: gk.prefix, Name: gk.name, Group: g, Revision: rev}, nil
}

func decodeGroupParts(gk *groupKeys) (*assign.Group, *assign.Tombstone, uint64, error) {
	if gk.head == nil {
		return nil, nil, 0, newErr(ErrCorrupt, "%d parts without a group record", len(gk.parts))
	}
	if gk.err != nil {
		return nil, nil, 0, gk.err
	}
	env, err := unframeOf(gk.head, kindGroup, kindTombstone)
	if err != nil {
		return nil, nil, 0, err
	}
	rev := env.StoreRevision
	if env.SchemaVersion == 1 {
		if len(gk.parts) > 0 {
			return nil, nil, 0, newErr(ErrCorrupt, "schema-1 group record with %d parts", len(gk.parts))
		}
		g, err := decodeGroupV1(env.Payload, gk.prefix, gk.name)
		return g, nil, rev, err
	}
	// Sort the parts into members and owner-epoch chunks.
	members := map[string][]byte{}
	owners := map[uint32][]byte{}
	for k, v := range gk.parts {
		_, _, part, _ := parseGroupSpaceKey([]byte(k))
		tag, rest, ok := parsePart(part)
		switch {
		case ok && tag == partMember && len(rest) > 0:
			members[string(rest)] = v
		case ok && tag == partOwners && len(rest) == 4:
			owners[binary.BigEndian.Uint32(rest)] = v
		default:
			return nil, nil, 0, newErr(ErrCorrupt, "unknown part key %q", k)
		}
	}
	epochs, err := decodeOwnerChunks(owners, rev)
	if err != nil {
		return nil, nil, 0, err
	}
	if env.Kind == kindTombstone {
		var t tombstoneV2
		if err := strictUnmarshal(env.Payload, &t); err != nil {
			return nil, nil, 0, newErr(ErrCorrupt, "tombstone payload: %v", err)
		}
		if t.StreamPrefix != gk.prefix || t.Name != gk.name {
			return nil, nil, 0, newErr(ErrCorrupt, "tombstone of group %s/%s stored under %s/%s", t.StreamPrefix, t.Name, gk.prefix, gk.name)
		}
		if len(members) > 0 || len(epochs) != t.OwnerEpochs {
			return nil, nil, 0, newErr(ErrCorrupt, "tombstone with %d members and %d of %d owner epochs", len(members), len(epochs), t.OwnerEpochs)
		}
		return nil, &assign.Tombstone{
			StreamPrefix: t.StreamPrefix, Name: t.Name,
			GroupEpoch: t.GroupEpoch, AssignmentEpoch: t.AssignmentEpoch, MetadataVersion: t.MetadataVersion,
			OwnerEpochs: epochs, DeletedAt: utc(t.DeletedAt),
		}, rev, nil
	}
	var rec groupV2
	if err := strictUnmarshal(env.Payload, &rec); err != nil {
		return nil, nil, 0, newErr(ErrCorrupt, "group payload: %v", err)
	}
	if rec.StreamPrefix != gk.prefix || rec.Name != gk.name {
		return nil, nil, 0, newErr(ErrCorrupt, "record of group %s/%s stored under %s/%s", rec.StreamPrefix, rec.Name, gk.prefix, gk.name)
	}
	if len(members) != rec.Members || len(epochs) != rec.OwnerEpochs {
		return nil, nil, 0, newErr(ErrCorrupt, "group record counts %d members and %d owner epochs, the store holds %d and %d",
			rec.Members, rec.OwnerEpochs, len(members), len(epochs))
	}
	g := &assign.Group{
		StreamPrefix:    rec.StreamPrefix,
		Name:            rec.Name,
		State:           protocol.GroupState(rec.State),
		GroupEpoch:      rec.GroupEpoch,
		AssignmentEpoch: rec.AssignmentEpoch,
		MetadataVersion: rec.MetadataVersion,
		ShardCount:      rec.ShardCount,
		DrainingShards:  cleanShards(rec.DrainingShards),
		Members:         make(map[string]*assign.Member, len(members)),
		Target:          make(map[string][]int, len(members)),
		CorrectionOpen:  rec.CorrectionOpen,
		CreatedAt:       utc(rec.CreatedAt),
		OwnerEpochs:     epochs,
	}
	if m := rec.ActiveMigration; m != nil {
		g.ActiveMigration = &protocol.Migration{
			ReshardingID: m.ReshardingID, FromShardCount: m.FromShardCount, ToShardCount: m.ToShardCount,
			State: protocol.MigrationState(m.State), CreatedAt: utc(m.CreatedAt), UpdatedAt: utc(m.UpdatedAt),
		}
	}
	for id, v := range members {
		if err := decodeMemberInto(g, id, v, rev); err != nil {
			return nil, nil, 0, err
		}
	}
	return g, nil, rev, nil
}

func decodeMemberInto(g *assign.Group, id string, v []byte, rev uint64) error {
	env, err := unframe(v, kindMember)
	if err != nil {
		return fmt.Errorf("member %q: %w", id, err)
	}
	if env.StoreRevision > rev {
		return newErr(ErrCorrupt, "member %q at revision %d, above the group's %d", id, env.StoreRevision, rev)
	}
	var m memberV2
	if err := strictUnmarshal(env.Payload, &m); err != nil {
		return newErr(ErrCorrupt, "member %q payload: %v", id, err)
	}
	if m.ID != id {
		return newErr(ErrCorrupt, "member %q stored under %q", m.ID, id)
	}
	g.Members[id] = &assign.Member{
		ID:                m.ID,
		Name:              m.Name,
		State:             protocol.MemberState(m.State),
		Epoch:             m.Epoch,
		PreviousEpoch:     m.PreviousEpoch,
		Current:           cleanShards(m.Current),
		Revoking:          cleanShards(m.Revoking),
		Granted:           cleanShards(m.Granted),
		Withdrawn:         decodeWithdrawn(m.Withdrawn),
		JoinVersion:       m.JoinVersion,
		JoinSeq:           m.JoinSeq,
		Reported:          m.Reported,
		JoinedAt:          utc(m.JoinedAt),
		RebalanceDeadline: utc(m.RebalanceDeadline),
		StateChangedAt:    utc(m.StateChangedAt),
		InstanceID:        m.InstanceID,
		JoinRequestID:     m.JoinRequestID,
	}
	if m.Target != nil {
		g.Target[id] = cleanShards(*m.Target)
	}
	return nil
}

// decodeOwnerChunks assembles owner epochs from their chunks, which must be
// contiguous from shard 0.
func decodeOwnerChunks(chunks map[uint32][]byte, rev uint64) ([]int64, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	out := make([]int64, 0, len(chunks)*ownerChunk)
	for c := uint32(0); c < uint32(len(chunks)); c++ {
		v, ok := chunks[c]
		if !ok {
			return nil, newErr(ErrCorrupt, "owner-epoch chunk %d missing of %d", c, len(chunks))
		}
		env, err := unframe(v, kindOwners)
		if err != nil {
			return nil, fmt.Errorf("owner-epoch chunk %d: %w", c, err)
		}
		if env.StoreRevision > rev {
			return nil, newErr(ErrCorrupt, "owner-epoch chunk %d at revision %d, above the group's %d", c, env.StoreRevision, rev)
		}
		var o ownersV2
		if err := strictUnmarshal(env.Payload, &o); err != nil {
			return nil, newErr(ErrCorrupt, "owner-epoch chunk %d: %v", c, err)
		}
		last := c == uint32(len(chunks))-1
		if o.First != int(c)*ownerChunk || len(o.Epochs) == 0 || len(o.Epochs) > ownerChunk || (!last && len(o.Epochs) != ownerChunk) {
			return nil, newErr(ErrCorrupt, "owner-epoch chunk %d holds %d epochs from shard %d", c, len(o.Epochs), o.First)
		}
		out = append(out, o.Epochs...)
	}
	return out, nil
}

// groupHeadRevision is the revision of the group record v: 0 for a
// tombstone (no group), an error for a record that does not decode.
func groupHeadRevision(v []byte, prefix, name string) (uint64, error) {
	what := "group " + prefix + "/" + name
	env, err := unframeOf(v, kindGroup, kindTombstone)
	if err != nil {
		return 0, opErr(what, err)
	}
	switch {
	case env.Kind == kindTombstone:
		var t tombstoneV2
		if err := strictUnmarshal(env.Payload, &t); err != nil {
			return 0, opErr(what, newErr(ErrCorrupt, "tombstone payload: %v", err))
		}
		return 0, nil
	case env.SchemaVersion == 1:
		if _, err := decodeGroupV1(env.Payload, prefix, name); err != nil {
			return 0, opErr(what, err)
		}
	default:
		var rec groupV2
		if err := strictUnmarshal(env.Payload, &rec); err != nil {
			return 0, opErr(what, newErr(ErrCorrupt, "group payload: %v", err))
		}
		if rec.StreamPrefix != prefix || rec.Name != name {
			return 0, opErr(what, newErr(ErrCorrupt, "record of group %s/%s stored under %s/%s", rec.StreamPrefix, rec.Name, prefix, name))
		}
	}
	return env.StoreRevision, nil
}

func encodeWithdrawn(ws []assign.Withdrawal) []withdrawalV2 {
	var out []withdrawalV2
	for _, w := range ws {
		out = append(out, withdrawalV2{Shard: w.Shard, Version: w.Version})
	}
	return out
}

// decodeWithdrawn returns the withdrawals sorted by shard, one per shard
// (the newest version kept: it asks the most of the member's next report).
func decodeWithdrawn(ws []withdrawalV2) []assign.Withdrawal {
	if len(ws) == 0 {
		return nil
	}
	out := make([]assign.Withdrawal, 0, len(ws))
	for _, w := range ws {
		out = append(out, assign.Withdrawal{Shard: w.Shard, Version: w.Version})
	}
	slices.SortFunc(out, func(a, b assign.Withdrawal) int {
		if a.Shard != b.Shard {
			return cmp.Compare(a.Shard, b.Shard)
		}
		return cmp.Compare(b.Version, a.Version)
	})
	return slices.CompactFunc(out, func(a, b assign.Withdrawal) bool { return a.Shard == b.Shard })
}
