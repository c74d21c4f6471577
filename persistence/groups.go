package persistence

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// A group is stored as several keys (see keys.go): the group record with the
// group-level state, one key per member with its target, and one key per
// chunk of ownerChunk owner epochs. A save writes the group record (it
// carries the group's revision) and the parts the caller says changed, in
// one commit. A change too large for one commit of the engine is staged:
//
//  1. its parts are written, in as many commits as needed, as staged
//     values under keys of the stage space named by the new revision;
//  2. the group record at the new revision is written alone: the commit
//     point. Staged values of a revision other than the group record's are
//     inert (a write that failed before its commit point) and are deleted at
//     open;
//  3. each staged value is applied to the real keys and deleted, one commit
//     each.
//
// A load overlays staged values of the group record's revision on the keys
// it read, so that a crash during step 3 loses nothing; open finishes such
// writes, and the next save of the group finishes them first.

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

// Changes names the parts of a group a save writes; see [assign.Changes],
// which it mirrors. The group record is always written.
type Changes struct {
	// Members lists members whose record (durable fields and target)
	// changed; one no longer in the group is deleted.
	Members []string
	// Removed lists members to delete.
	Removed []string
	// OwnerEpochs lists shards whose owner epoch changed.
	OwnerEpochs []int
}

// ChangesOf converts the changes a step of package assign reports.
func ChangesOf(c assign.Changes) *Changes {
	return &Changes{Members: c.Members, Removed: c.Removed, OwnerEpochs: c.OwnerEpochs}
}

// Add merges o into c (group commit: several steps, one save).
func (c *Changes) Add(o assign.Changes) {
	c.Members = append(c.Members, o.Members...)
	c.Removed = append(c.Removed, o.Removed...)
	c.OwnerEpochs = append(c.OwnerEpochs, o.OwnerEpochs...)
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

// groupWriter builds the ops of one group save at one revision.
type groupWriter struct {
	g   *assign.Group
	rev uint64
	ops []op
	// written are the part keys put, for a full save's cleanup.
	written map[string]bool
}

func (w *groupWriter) putMember(id string) error {
	m := w.g.Members[id]
	key := memberKey(w.g.StreamPrefix, w.g.Name, id)
	if m == nil {
		w.ops = append(w.ops, delOp(key))
		return nil
	}
	if m.ID != id {
		return fmt.Errorf("persistence: group %s/%s: member key %q holds member id %q", w.g.StreamPrefix, w.g.Name, id, m.ID)
	}
	target, inTarget := w.g.Target[id]
	payload, err := encodeMember(m, target, inTarget)
	if err != nil {
		return err
	}
	w.ops = append(w.ops, putOp(key, frame(kindMember, w.rev, payload)))
	if w.written != nil {
		w.written[string(key)] = true
	}
	return nil
}

func (w *groupWriter) putOwners(chunk uint32) error {
	payload, err := encodeOwners(w.g.OwnerEpochs, chunk)
	if err != nil {
		return err
	}
	key := ownersKey(w.g.StreamPrefix, w.g.Name, chunk)
	w.ops = append(w.ops, putOp(key, frame(kindOwners, w.rev, payload)))
	if w.written != nil {
		w.written[string(key)] = true
	}
	return nil
}

// validGroup refuses a group whose record would not load back the same:
// the parts changes names, or the whole group when changes is nil (a save
// costs what it writes, not the group's size).
func validGroup(g *assign.Group, changes *Changes) error {
	if g == nil {
		return errors.New("persistence: nil group")
	}
	if err := validGroupName(g.StreamPrefix, g.Name); err != nil {
		return err
	}
	check := func(id string) error {
		if m, ok := g.Members[id]; ok && m == nil {
			return fmt.Errorf("persistence: group %s/%s: member %q is nil", g.StreamPrefix, g.Name, id)
		}
		if _, ok := g.Target[id]; ok && g.Members[id] == nil {
			return fmt.Errorf("persistence: group %s/%s: target of %q, who is no member", g.StreamPrefix, g.Name, id)
		}
		return nil
	}
	if changes != nil {
		for _, ids := range [][]string{changes.Members, changes.Removed} {
			for _, id := range ids {
				if err := check(id); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for id := range g.Members {
		if err := check(id); err != nil {
			return err
		}
	}
	for id := range g.Target {
		if err := check(id); err != nil {
			return err
		}
	}
	return nil
}

// SaveGroup implements [Store.SaveGroup].
func (c *core) SaveGroup(ctx context.Context, g *assign.Group, changes *Changes, expected uint64) (rev uint64, err error) {
	if err := validGroup(g, changes); err != nil {
		return 0, err
	}
	head, err := encodeGroupHead(g)
	if err != nil {
		return 0, err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	what := "group " + g.StreamPrefix + "/" + g.Name
	key := groupKey(g.StreamPrefix, g.Name)
	st := c.lock(key)
	defer st.mu.Unlock()
	stored, err := c.storedRevision(ctx, st, key, what)
	if err != nil {
		return 0, err
	}
	if stored != expected {
		return 0, opErr(what, newErr(ErrStaleRevision, "at revision %d, the write expected %d", stored, expected))
	}
	if err := c.finishStaged(ctx, st, g.StreamPrefix, g.Name, stored); err != nil {
		return 0, opErr(what, c.failUnlessRecord(err))
	}
	next := c.revision.Add(1)
	w := &groupWriter{g: g, rev: next}
	if changes == nil {
		err = c.fullGroupOps(ctx, w)
	} else {
		err = changedGroupOps(w, changes)
	}
	if err != nil {
		return 0, opErr(what, err)
	}
	headOp := putOp(key, frame(kindGroup, next, head))
	if err := c.commitGroup(ctx, g.StreamPrefix, g.Name, next, headOp, w.ops); err != nil {
		return 0, opErr(what, c.fail(err))
	}
	st.remember(key, next)
	return next, nil
}

// changedGroupOps writes the parts named in ch.
func changedGroupOps(w *groupWriter, ch *Changes) error {
	seen := map[string]bool{}
	for _, id := range ch.Members {
		if seen[id] {
			continue
		}
		seen[id] = true
		if err := w.putMember(id); err != nil {
			return err
		}
	}
	for _, id := range ch.Removed {
		if seen[id] {
			continue
		}
		seen[id] = true
		if w.g.Members[id] != nil {
			return fmt.Errorf("persistence: group %s/%s: member %q listed as removed is in the group", w.g.StreamPrefix, w.g.Name, id)
		}
		w.ops = append(w.ops, delOp(memberKey(w.g.StreamPrefix, w.g.Name, id)))
	}
	chunks := map[uint32]bool{}
	for _, s := range ch.OwnerEpochs {
		if s < 0 || s >= len(w.g.OwnerEpochs) {
			return fmt.Errorf("persistence: group %s/%s: changed owner epoch of shard %d of %d", w.g.StreamPrefix, w.g.Name, s, len(w.g.OwnerEpochs))
		}
		chunk := uint32(s / ownerChunk)
		if chunks[chunk] {
			continue
		}
		chunks[chunk] = true
		if err := w.putOwners(chunk); err != nil {
			return err
		}
	}
	return nil
}

// fullGroupOps writes every part of the group and deletes every stored part
// it no longer has.
func (c *core) fullGroupOps(ctx context.Context, w *groupWriter) error {
	w.written = map[string]bool{}
	ids := make([]string, 0, len(w.g.Members))
	for id := range w.g.Members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := w.putMember(id); err != nil {
			return err
		}
	}
	for chunk := 0; chunk*ownerChunk < len(w.g.OwnerEpochs); chunk++ {
		if err := w.putOwners(uint32(chunk)); err != nil {
			return err
		}
	}
	lo, hi := subPartBounds(w.g.StreamPrefix, w.g.Name)
	return c.kv.scan(ctx, lo, hi, func(k, _ []byte) error {
		if !w.written[string(k)] {
			w.ops = append(w.ops, delOp(bytes.Clone(k)))
		}
		return nil
	})
}

// commitGroup writes ops and then head (the group key at rev) atomically:
// in one commit when they fit the engine's limits, else staged (see the top
// of this file).
func (c *core) commitGroup(ctx context.Context, prefix, name string, rev uint64, head op, ops []op) error {
	lim := c.kv.limits()
	all := append(ops, head)
	if fits(all, lim) {
		return c.commit(ctx, all...)
	}
	parts := splitStaged(ops, lim)
	for i, p := range parts {
		payload, err := json.Marshal(stageV2{Ops: p.staged})
		if err != nil {
			return err
		}
		if err := c.commit(ctx, putOp(stageKey(prefix, name, rev, uint32(i)), frame(kindStage, rev, payload))); err != nil {
			return err
		}
	}
	if err := c.commit(ctx, head); err != nil {
		return err
	}
	for i, p := range parts {
		if err := c.commit(ctx, append(p.ops, delOp(stageKey(prefix, name, rev, uint32(i))))...); err != nil {
			return err
		}
	}
	return nil
}

func fits(ops []op, lim kvLimits) bool {
	if lim.MaxOps > 0 && len(ops) > lim.MaxOps {
		return false
	}
	total := 0
	for _, o := range ops {
		total += o.size()
	}
	return lim.MaxBytes <= 0 || total <= lim.MaxBytes
}

type stagedPart struct {
	ops    []op
	staged []stagedOp
}

// stageOverhead is room left in a commit for its keys and framing.
const stageOverhead = 4096

// splitStaged cuts ops into parts whose staged value and whose apply (the
// ops plus the delete of the staged value) each fit one commit.
func splitStaged(ops []op, lim kvLimits) []stagedPart {
	maxOps := lim.MaxOps - 1
	budget := lim.MaxBytes - stageOverhead
	var parts []stagedPart
	var cur stagedPart
	size := 0
	for _, o := range ops {
		// JSON base64 of key and value plus field names.
		enc := (o.size()+2)/3*4 + 32
		if len(cur.ops) > 0 && ((maxOps > 0 && len(cur.ops) >= maxOps) || (budget > 0 && size+enc > budget)) {
			parts = append(parts, cur)
			cur, size = stagedPart{}, 0
		}
		cur.ops = append(cur.ops, o)
		cur.staged = append(cur.staged, stagedOp{Key: o.key, Value: o.value, Del: o.del})
		size += enc
	}
	if len(cur.ops) > 0 {
		parts = append(parts, cur)
	}
	return parts
}

// finishStaged applies the staged writes a load of the group found at the
// group's revision, stored (the revision of the group record just read),
// and deletes inert ones. The caller holds st. The cached revision cannot
// serve here: noteStaged dropped it so that the write reads the record.
func (c *core) finishStaged(ctx context.Context, st *stripe, prefix, name string, stored uint64) error {
	key := string(groupKey(prefix, name))
	if !st.staged[key] {
		return nil
	}
	if err := c.applyStaged(ctx, prefix, name, stored); err != nil {
		return err
	}
	delete(st.staged, key)
	return nil
}

// failUnlessRecord is fail for an error of a commit, and leaves the store
// serving for a staged value that does not decode (found before anything
// was written): that group fails closed, as its loads do.
func (c *core) failUnlessRecord(err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnknownSchema) {
		return err
	}
	return c.fail(err)
}

// applyStaged applies the staged parts of prefix/name at rev and deletes
// all its staged parts. It decodes every staged value of rev before it
// writes anything, so a value that does not decode (ErrCorrupt,
// ErrUnknownSchema) leaves the engine as it was.
func (c *core) applyStaged(ctx context.Context, prefix, name string, rev uint64) error {
	type part struct {
		key []byte
		ops []op
	}
	var parts []part
	lo, hi := stageBounds(prefix, name)
	err := c.kv.scan(ctx, lo, hi, func(k, v []byte) error {
		p := part{key: bytes.Clone(k)}
		if _, _, r, ok := parseStageKey(k); ok && r == rev {
			ops, err := decodeStage(v, rev)
			if err != nil {
				return err
			}
			p.ops = ops
		}
		parts = append(parts, p)
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := c.commit(ctx, append(p.ops, delOp(p.key))...); err != nil {
			return err
		}
	}
	return nil
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

// groupKeys is what a load read of one group: its group value and parts,
// with committed staged writes laid over them.
type groupKeys struct {
	prefix, name string
	head         []byte
	parts        map[string][]byte
	staged       bool
	// err is why a committed staged write of the group does not decode:
	// the group fails closed with it, the other groups load.
	err error
}

// overlay lays the staged parts at the group's revision over g and sets
// g.staged when there were any, g.err when one does not decode.
func (g *groupKeys) overlay(stages [][2][]byte) {
	if g.head == nil || len(stages) == 0 {
		return
	}
	env, err := unframeOf(g.head, kindGroup, kindTombstone)
	if err != nil {
		return // the head fails to decode on its own
	}
	for _, kv := range stages {
		_, _, rev, ok := parseStageKey(kv[0])
		if !ok || rev != env.StoreRevision {
			continue
		}
		g.staged = true
		ops, err := decodeStage(kv[1], rev)
		if err != nil {
			g.err = fmt.Errorf("staged write %q: %w", kv[0], err)
			return
		}
		for _, o := range ops {
			if o.del {
				delete(g.parts, string(o.key))
			} else {
				g.parts[string(o.key)] = o.value
			}
		}
	}
}

// readGroups reads every group of prefix (or only name when it is not "")
// with its parts and staged writes.
func (c *core) readGroups(ctx context.Context, prefix, name string) ([]*groupKeys, error) {
	var lo, hi []byte
	if name == "" {
		lo, hi = groupBounds(prefix)
	} else {
		lo, hi = groupPartBounds(prefix, name)
	}
	var out []*groupKeys
	byName := map[string]*groupKeys{}
	err := c.kv.scan(ctx, lo, hi, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, n, part, ok := parseGroupSpaceKey(k)
		if !ok || p != prefix || (name != "" && n != name) {
			// Cannot happen with the bounds above; refuse rather than mix
			// another prefix's group in.
			return newErr(ErrCorrupt, "key %q outside the groups of %s", k, prefix)
		}
		g := byName[n]
		if g == nil {
			g = &groupKeys{prefix: p, name: n, parts: map[string][]byte{}}
			byName[n] = g
			out = append(out, g)
		}
		if part == nil {
			g.head = bytes.Clone(v)
		} else {
			g.parts[string(k)] = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	stages := map[string][][2][]byte{}
	lo, hi = stageBounds(prefix, name)
	err = c.kv.scan(ctx, lo, hi, func(k, v []byte) error {
		if _, n, _, ok := parseStageKey(k); ok {
			stages[n] = append(stages[n], [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, g := range out {
		g.overlay(stages[g.name])
	}
	return out, nil
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

// LoadGroups implements [Store.LoadGroups].
func (c *core) LoadGroups(ctx context.Context, streamPrefix string) (out []GroupRecord, err error) {
	if err := validStreamPrefix(streamPrefix); err != nil {
		return nil, err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	gks, err := c.readGroups(ctx, streamPrefix, "")
	if err != nil {
		return nil, opErr("load groups of "+streamPrefix, err)
	}
	out = []GroupRecord{}
	for _, gk := range gks {
		rec, tomb := decodeGroupKeys(gk)
		if tomb != nil {
			c.observeTombstone(groupKey(gk.prefix, gk.name), rec.Revision)
			continue
		}
		c.noteStaged(gk)
		c.observeLoaded(groupKey(gk.prefix, gk.name), rec.Revision)
		out = append(out, rec)
	}
	return out, nil
}

// noteStaged remembers that gk had committed staged writes not yet applied,
// so that the next save of the group applies them first.
func (c *core) noteStaged(gk *groupKeys) {
	if !gk.staged {
		return
	}
	c.markStaged(groupKey(gk.prefix, gk.name))
}

// markStaged makes the next save or delete of the group of key read its
// record and finish (or refuse over) its staged writes first.
func (c *core) markStaged(key []byte) {
	st := c.lock(key)
	defer st.mu.Unlock()
	if st.staged == nil {
		st.staged = map[string]bool{}
	}
	st.staged[string(key)] = true
	delete(st.revisions, string(key))
}

// loadOne reads and decodes one group.
func (c *core) loadOne(ctx context.Context, streamPrefix, name string) (GroupRecord, *assign.Tombstone, error) {
	gks, err := c.readGroups(ctx, streamPrefix, name)
	if err != nil {
		return GroupRecord{}, nil, err
	}
	if len(gks) == 0 {
		return GroupRecord{}, nil, newErr(ErrNotFound, "")
	}
	c.noteStaged(gks[0])
	rec, tomb := decodeGroupKeys(gks[0])
	return rec, tomb, nil
}

// LoadGroup implements [Store.LoadGroup].
func (c *core) LoadGroup(ctx context.Context, streamPrefix, name string) (rec GroupRecord, err error) {
	if err := validGroupName(streamPrefix, name); err != nil {
		return GroupRecord{}, err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return GroupRecord{}, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	what := "group " + streamPrefix + "/" + name
	rec, tomb, err := c.loadOne(ctx, streamPrefix, name)
	if err != nil {
		return GroupRecord{}, opErr(what, err)
	}
	if tomb != nil {
		c.observeTombstone(groupKey(streamPrefix, name), rec.Revision)
		return GroupRecord{}, opErr(what, newErr(ErrNotFound, "deleted"))
	}
	c.observeLoaded(groupKey(streamPrefix, name), rec.Revision)
	return rec, rec.Err
}

// LoadTombstone implements [Store.LoadTombstone].
func (c *core) LoadTombstone(ctx context.Context, streamPrefix, name string) (t *assign.Tombstone, err error) {
	if err := validGroupName(streamPrefix, name); err != nil {
		return nil, err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	what := "tombstone " + streamPrefix + "/" + name
	rec, tomb, err := c.loadOne(ctx, streamPrefix, name)
	switch {
	case err != nil:
		return nil, opErr(what, err)
	case tomb != nil:
		c.observeTombstone(groupKey(streamPrefix, name), rec.Revision)
		return tomb, nil
	case rec.Err != nil:
		return nil, rec.Err
	}
	return nil, opErr(what, newErr(ErrNotFound, "the group exists"))
}

// DeleteGroup implements [Store.DeleteGroup]: the group record becomes a
// tombstone with the group's last epochs and version, its members are
// deleted and its owner epochs stay.
func (c *core) DeleteGroup(ctx context.Context, streamPrefix, name string, expected uint64) (err error) {
	if err := validGroupName(streamPrefix, name); err != nil {
		return err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer exit()
	defer c.recoverFatal(&err)
	what := "group " + streamPrefix + "/" + name
	key := groupKey(streamPrefix, name)
	st := c.lock(key)
	defer st.mu.Unlock()
	stored, err := c.storedRevision(ctx, st, key, what)
	switch {
	case err != nil:
		return err
	case stored == 0:
		return opErr(what, newErr(ErrNotFound, ""))
	case stored != expected:
		return opErr(what, newErr(ErrStaleRevision, "at revision %d, the delete expected %d", stored, expected))
	}
	if err := c.finishStaged(ctx, st, streamPrefix, name, stored); err != nil {
		return opErr(what, c.failUnlessRecord(err))
	}
	rec, tomb, err := c.loadOne(ctx, streamPrefix, name)
	switch {
	case err == nil && tomb != nil:
		// Deleted behind this store's cache (another replica, cluster mode).
		err = newErr(ErrNotFound, "deleted")
	case err == nil:
		err = rec.Err
	}
	if err != nil {
		return opErr(what, err)
	}
	g := rec.Group
	payload, err := json.Marshal(tombstoneV2{
		StreamPrefix: streamPrefix, Name: name,
		GroupEpoch: g.GroupEpoch, AssignmentEpoch: g.AssignmentEpoch, MetadataVersion: g.MetadataVersion,
		OwnerEpochs: len(g.OwnerEpochs), DeletedAt: time.Now().UTC(),
	})
	if err != nil {
		return err
	}
	rev := c.revision.Add(1)
	w := &groupWriter{g: g, rev: rev}
	for id := range g.Members {
		w.ops = append(w.ops, delOp(memberKey(streamPrefix, name, id)))
	}
	if err := c.commitGroup(ctx, streamPrefix, name, rev, putOp(key, frame(kindTombstone, rev, payload)), w.ops); err != nil {
		return opErr(what, c.fail(err))
	}
	st.remember(key, 0)
	return nil
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
