package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
)

// open readies a core over a freshly opened engine: it refuses a newer key
// layout, raises the revision counter above every stored revision, finishes
// or drops staged group writes a crash interrupted, migrates a store of key
// layout 1 and marks the store with the current layout.
func (c *core) open(ctx context.Context) error {
	layout, err := c.readLayout(ctx)
	if err != nil {
		return err
	}
	if layout > keyLayout {
		return opErr("key layout marker", newErr(ErrUnknownSchema, "key layout %d, this build reads %d and older", layout, keyLayout))
	}
	if err := c.recoverRevisions(ctx); err != nil {
		return err
	}
	// A store shared by replicas (etcd with fences) leaves each group's
	// staged writes to the group's owner: it finishes them at its first
	// save after loading the group, and this replica may not write them.
	if !c.shared {
		if err := c.cleanStaged(ctx); err != nil {
			return err
		}
	}
	if layout == 1 {
		if err := c.migrate(ctx); err != nil {
			return fmt.Errorf("migrate key layout 1: %w", err)
		}
	}
	if layout != keyLayout {
		payload, err := json.Marshal(layoutV1{KeyLayout: keyLayout})
		if err != nil {
			return err
		}
		return c.commit(ctx, putOp(layoutKey, frame(kindLayout, 1, payload)))
	}
	return nil
}

// readLayout returns the key layout of the store, 0 for a new one.
func (c *core) readLayout(ctx context.Context) (int, error) {
	v, err := c.kv.get(ctx, layoutKey)
	if errors.Is(err, errNoKey) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	env, err := unframe(v, kindLayout)
	if err != nil {
		return 0, opErr("key layout marker", err)
	}
	var l layoutV1
	if err := strictUnmarshal(env.Payload, &l); err != nil {
		return 0, opErr("key layout marker", newErr(ErrCorrupt, "%v", err))
	}
	if l.KeyLayout < 1 {
		return 0, opErr("key layout marker", newErr(ErrCorrupt, "key layout %d", l.KeyLayout))
	}
	return l.KeyLayout, nil
}

// recoverRevisions scans every record once at open and raises the revision
// counter to the highest stored revision. Records that do not decode are
// skipped here; they fail when loaded.
func (c *core) recoverRevisions(ctx context.Context) error {
	scan := func(lower, upper []byte, kinds ...string) error {
		return c.kv.scan(ctx, lower, upper, func(_, v []byte) error {
			if env, err := unframeOf(v, kinds...); err == nil {
				c.observeRevision(env.StoreRevision)
			}
			return nil
		})
	}
	lo, hi := streamBounds()
	if err := scan(lo, hi, kindStream); err != nil {
		return err
	}
	lo, hi = allGroupBounds()
	if err := scan(lo, hi, kindGroup, kindTombstone, kindMember, kindOwners); err != nil {
		return err
	}
	lo, hi = allStageBounds()
	if err := scan(lo, hi, kindStage); err != nil {
		return err
	}
	lo, hi = apiTokenBounds()
	if err := scan(lo, hi, kindAPIToken); err != nil {
		return err
	}
	if v, err := c.kv.get(ctx, floorKey); err == nil {
		if env, err := unframe(v, kindFloor); err == nil {
			c.observeRevision(env.StoreRevision)
		}
	} else if !errors.Is(err, errNoKey) {
		return err
	}
	// Audit entries are keyed by their sequence, which is a revision too:
	// the newest key alone says how far the counter went.
	lo, hi = auditBounds()
	err := c.kv.scanReverse(ctx, lo, hi, func(k, _ []byte) error {
		if seq, ok := parseAuditKey(k); ok {
			c.observeRevision(seq)
		}
		return errStopScan
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return err
}

// cleanStaged finishes every staged group write that reached its commit
// point and deletes the others (see group_staged.go).
func (c *core) cleanStaged(ctx context.Context) error {
	type group struct{ prefix, name string }
	var groups []group
	seen := map[group]bool{}
	lo, hi := allStageBounds()
	err := c.kv.scan(ctx, lo, hi, func(k, _ []byte) error {
		p, n, _, ok := parseStageKey(k)
		if !ok {
			return newErr(ErrCorrupt, "key %q in the stage space", k)
		}
		if g := (group{p, n}); !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, g := range groups {
		var rev uint64
		v, err := c.kv.get(ctx, groupKey(g.prefix, g.name))
		switch {
		case err == nil:
			if env, err := unframeOf(v, kindGroup, kindTombstone); err == nil {
				rev = env.StoreRevision
			}
		case !errors.Is(err, errNoKey):
			return err
		}
		err = c.applyStaged(ctx, g.prefix, g.name, rev)
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnknownSchema) {
			// That group fails closed when loaded (its staged write stays
			// for an operator to look at) and its saves are refused; the
			// rest of the store serves.
			if c.log != nil {
				c.log.Error("a committed staged write does not decode; its group fails closed",
					slog.String("stream", g.prefix), slog.String("group", g.name), slog.Any("error", err))
			}
			c.markStaged(groupKey(g.prefix, g.name))
			continue
		}
		if err != nil {
			return fmt.Errorf("staged write of group %s/%s: %w", g.prefix, g.name, err)
		}
	}
	return nil
}

// migrate rewrites every schema-1 group record (the whole group in one
// value) as a schema-2 group record with one key per member. Each group is
// one atomic (or staged) write, and the layout marker changes only after
// all of them, so a crash during migration resumes at the next open. A
// record that does not decode stays as it is and fails closed when loaded.
func (c *core) migrate(ctx context.Context) error {
	type old struct {
		prefix, name string
	}
	var olds []old
	lo, hi := allGroupBounds()
	err := c.kv.scan(ctx, lo, hi, func(k, v []byte) error {
		p, n, ok := parseGroupKey(k)
		if !ok {
			return nil
		}
		if env, err := unframeOf(v, kindGroup); err == nil && env.SchemaVersion == 1 {
			olds = append(olds, old{p, n})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, o := range olds {
		key := groupKey(o.prefix, o.name)
		v, err := c.kv.get(ctx, key)
		if err != nil {
			return err
		}
		env, err := unframeOf(v, kindGroup)
		if err != nil {
			continue
		}
		g, err := decodeGroupV1(env.Payload, o.prefix, o.name)
		if err != nil {
			continue
		}
		head, err := encodeGroupHead(g)
		if err != nil {
			return err
		}
		rev := c.revision.Add(1)
		w := &groupWriter{g: g, rev: rev}
		if err := c.fullGroupOps(ctx, w); err != nil {
			return err
		}
		if err := c.commitGroup(ctx, o.prefix, o.name, rev, putOp(key, frame(kindGroup, rev, head)), w.ops); err != nil {
			return err
		}
	}
	return nil
}
