package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"

	"github.com/rscoord/rscoord/assign"
)

// lockStripes is the number of record locks. A write holds the lock of its
// key's stripe from the revision check to the end of the synced write, so
// writers of different records (almost always in different stripes) reach
// Pebble's commit pipeline together and share fsyncs.
const lockStripes = 1024

// stripe serializes the writes of the records whose keys hash to it.
type stripe struct {
	mu sync.Mutex
	// revisions caches, per key, the revision this store last wrote (0 after
	// a delete: known absent), so that a write does not read and decode the
	// stored record first. A key missing here is read from the engine. The
	// cache is right because the store is the only writer of its engine
	// (Pebble's lock file keeps other processes out). Guarded by mu.
	revisions map[string]uint64
}

// core implements [Store] over a kv.
//
// Lock order: life (read) → stripe. life is held for reading by every call
// and for writing by Close alone, so Close waits for calls in flight and no
// call touches the engine after it is closed.
type core struct {
	kv kv

	life   sync.RWMutex
	closed bool // guarded by life

	// failed holds the write error that made the store's contents unknown.
	failed atomic.Pointer[error]

	// revision is the highest revision handed out or found at open.
	revision atomic.Uint64

	stripes [lockStripes]stripe

	stats writeStats
}

func newCore(engine kv) *core { return &core{kv: engine} }

// enter starts a call: it fails with ErrClosed or ErrFailed, or holds life
// for reading until the returned func runs.
func (c *core) enter(ctx context.Context) (exit func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.life.RLock()
	if c.closed {
		c.life.RUnlock()
		return nil, ErrClosed
	}
	if f := c.failed.Load(); f != nil {
		c.life.RUnlock()
		return nil, &recordError{sentinel: ErrFailed, cause: *f}
	}
	return c.life.RUnlock, nil
}

// fail makes the store refuse every later call. Called with the error of a
// write whose outcome is unknown.
func (c *core) fail(err error) error {
	c.failed.CompareAndSwap(nil, &err)
	return &recordError{sentinel: ErrFailed, cause: err}
}

// recoverFatal turns a fatal engine error, which Pebble reports by calling
// Logger.Fatalf and our logger turns into a panic (see pebbleLogger), into a
// failed store and an error result. Any other panic goes on.
func (c *core) recoverFatal(err *error) {
	r := recover()
	if r == nil {
		return
	}
	fe, ok := r.(*fatalError)
	if !ok {
		panic(r)
	}
	*err = c.fail(fe)
}

// lock locks the stripe of key and returns it.
func (c *core) lock(key []byte) *stripe {
	h := fnv.New32a()
	h.Write(key)
	s := &c.stripes[h.Sum32()%lockStripes]
	s.mu.Lock()
	return s
}

// storedRevision returns the revision stored under key, 0 if there is none.
// The caller holds the stripe st of key. A value that does not decode, as a
// load would decode it, is an error (ErrCorrupt or ErrUnknownSchema): it must
// not be overwritten or deleted.
func (c *core) storedRevision(ctx context.Context, st *stripe, key []byte, what string) (uint64, error) {
	if rev, ok := st.revisions[string(key)]; ok {
		return rev, nil
	}
	v, err := c.kv.get(ctx, key)
	if errors.Is(err, errNoKey) {
		return 0, nil
	}
	if err != nil {
		return 0, opErr(what, err)
	}
	if prefix, ok := parseStreamKey(key); ok {
		rec := decodeStreamValue(v, prefix)
		return rec.Revision, rec.Err
	}
	if prefix, name, ok := parseGroupKey(key); ok {
		rec := decodeGroupValue(v, prefix, name)
		return rec.Revision, rec.Err
	}
	return 0, fmt.Errorf("persistence: key %q outside the record key spaces", key)
}

// remember caches rev as the revision of key; the caller holds st.
func (st *stripe) remember(key []byte, rev uint64) {
	if st.revisions == nil {
		st.revisions = make(map[string]uint64)
	}
	st.revisions[string(key)] = rev
}

// forget drops the cached revision of key, so that the next write reads the
// stored record. Only tests need it: they write behind the store's back.
func (c *core) forget(key []byte) {
	st := c.lock(key)
	defer st.mu.Unlock()
	delete(st.revisions, string(key))
}

// put writes payload under key if the stored revision is expected.
func (c *core) put(ctx context.Context, key []byte, kind string, payload []byte, expected uint64, what string) (uint64, error) {
	st := c.lock(key)
	defer st.mu.Unlock()
	stored, err := c.storedRevision(ctx, st, key, what)
	if err != nil {
		return 0, err
	}
	if stored != expected {
		return 0, opErr(what, newErr(ErrStaleRevision, "at revision %d, the write expected %d", stored, expected))
	}
	next := c.revision.Add(1)
	if err := c.commit(ctx, putOp(key, frame(kind, next, payload))); err != nil {
		return 0, opErr(what, c.fail(err))
	}
	st.remember(key, next)
	return next, nil
}

// commit runs one engine commit of ops and counts what it wrote.
func (c *core) commit(ctx context.Context, ops ...op) error {
	if err := c.kv.commit(ctx, ops); err != nil {
		return err
	}
	c.stats.count(ops)
	return nil
}

// observeRevision raises the revision counter to at least r.
func (c *core) observeRevision(r uint64) {
	for {
		cur := c.revision.Load()
		if r <= cur || c.revision.CompareAndSwap(cur, r) {
			return
		}
	}
}

// recoverRevisions scans every record once at open and raises the revision
// counter to the highest stored revision. Records that do not decode are
// skipped here; they fail when loaded.
func (c *core) recoverRevisions(ctx context.Context) error {
	scan := func(lower, upper []byte, kind string) error {
		return c.kv.scan(ctx, lower, upper, func(_, v []byte) error {
			if env, err := unframe(v, kind); err == nil {
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
	if err := scan(lo, hi, kindGroup); err != nil {
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

// checkLayout refuses a store written with another key layout and marks a
// new one with ours.
func (c *core) checkLayout(ctx context.Context) error {
	v, err := c.kv.get(ctx, layoutKey)
	if errors.Is(err, errNoKey) {
		payload, err := json.Marshal(layoutV1{KeyLayout: keyLayout})
		if err != nil {
			return err
		}
		return c.commit(ctx, putOp(layoutKey, frame(kindLayout, 1, payload)))
	}
	if err != nil {
		return err
	}
	env, err := unframe(v, kindLayout)
	if err != nil {
		return opErr("key layout marker", err)
	}
	var l layoutV1
	if err := strictUnmarshal(env.Payload, &l); err != nil {
		return opErr("key layout marker", newErr(ErrCorrupt, "%v", err))
	}
	if l.KeyLayout != keyLayout {
		return opErr("key layout marker", newErr(ErrUnknownSchema, "key layout %d, this build reads only %d", l.KeyLayout, keyLayout))
	}
	return nil
}

func decodeStreamValue(v []byte, prefix string) StreamRecord {
	env, err := unframe(v, kindStream)
	if err == nil {
		var rec StreamRecord
		if rec, err = decodeStream(env.Payload, prefix); err == nil {
			rec.Revision = env.StoreRevision
			return rec
		}
	}
	return StreamRecord{StreamPrefix: prefix, Err: opErr("stream "+prefix, err)}
}

func decodeGroupValue(v []byte, prefix, name string) GroupRecord {
	env, err := unframe(v, kindGroup)
	if err == nil {
		var g *assign.Group
		if g, err = decodeGroup(env.Payload, prefix, name); err == nil {
			return GroupRecord{StreamPrefix: prefix, Name: name, Group: g, Revision: env.StoreRevision}
		}
	}
	return GroupRecord{StreamPrefix: prefix, Name: name, Err: opErr("group "+prefix+"/"+name, err)}
}

// LoadStreams implements [Store.LoadStreams].
func (c *core) LoadStreams(ctx context.Context) (out []StreamRecord, err error) {
	exit, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	lo, hi := streamBounds()
	out = []StreamRecord{}
	err = c.kv.scan(ctx, lo, hi, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		prefix, _ := parseStreamKey(k)
		out = append(out, decodeStreamValue(v, prefix))
		return nil
	})
	if err != nil {
		return nil, opErr("load streams", err)
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
	lo, hi := groupBounds(streamPrefix)
	out = []GroupRecord{}
	err = c.kv.scan(ctx, lo, hi, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		prefix, name, ok := parseGroupKey(k)
		if !ok || prefix != streamPrefix {
			// Cannot happen with the bounds above; refuse rather than mix
			// another prefix's group in.
			return newErr(ErrCorrupt, "key %q outside the groups of %s", k, streamPrefix)
		}
		out = append(out, decodeGroupValue(v, prefix, name))
		return nil
	})
	if err != nil {
		return nil, opErr("load groups of "+streamPrefix, err)
	}
	return out, nil
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
	v, err := c.kv.get(ctx, groupKey(streamPrefix, name))
	if errors.Is(err, errNoKey) {
		return GroupRecord{}, opErr(what, newErr(ErrNotFound, ""))
	}
	if err != nil {
		return GroupRecord{}, opErr(what, err)
	}
	rec = decodeGroupValue(v, streamPrefix, name)
	return rec, rec.Err
}

// SaveStream implements [Store.SaveStream].
func (c *core) SaveStream(ctx context.Context, rec StreamRecord, expected uint64) (rev uint64, err error) {
	payload, err := encodeStream(rec)
	if err != nil {
		return 0, err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	return c.put(ctx, streamKey(rec.StreamPrefix), kindStream, payload, expected, "stream "+rec.StreamPrefix)
}

// SaveGroup implements [Store.SaveGroup].
func (c *core) SaveGroup(ctx context.Context, g *assign.Group, expected uint64) (rev uint64, err error) {
	payload, err := encodeGroup(g)
	if err != nil {
		return 0, err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	return c.put(ctx, groupKey(g.StreamPrefix, g.Name), kindGroup, payload, expected, "group "+g.StreamPrefix+"/"+g.Name)
}

// DeleteGroup implements [Store.DeleteGroup].
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
	if err := c.commit(ctx, delOp(key)); err != nil {
		return opErr(what, c.fail(err))
	}
	st.remember(key, 0)
	return nil
}

// Close implements [Store.Close]: it closes the engine once, after the
// calls in flight; later calls return nil.
func (c *core) Close() (err error) {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	defer c.recoverFatal(&err)
	return c.kv.close()
}
