package persistence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rscoord/rscoord/assign"
)

// Saving, loading and deleting groups. A group is stored as several keys;
// a change too large for one commit of the engine is staged (see
// group_staged.go).

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
	stored, err := c.revisionToDelete(ctx, st, key, what, expected)
	if err != nil {
		return err
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
