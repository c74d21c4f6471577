package persistence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
