package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
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
	// staged marks group keys whose last load found committed staged
	// writes not yet applied (see group_staged.go). Guarded by mu.
	staged map[string]bool
}

// core implements [Store] over a kv.
//
// Lock order: life (read) → stripe. life is held for reading by every call
// and for writing by Close alone, so Close waits for calls in flight and no
// call touches the engine after it is closed.
type core struct {
	// kv is the engine; a recovery replaces it (under life held for
	// writing).
	kv kv
	// shared is set when other processes write the same engine, each only
	// the units it owns (the etcd engine with fences).
	shared bool
	// kvClosed is set once kv was closed (a failed recovery attempt leaves
	// it so). Guarded by life.
	kvClosed bool
	// opening delivers the result of a reopen still running in the
	// background (see reopened). Guarded by life.
	opening chan reopenResult
	// reopen opens the engine again, for recovery after a failed write;
	// nil for an engine that cannot fail (memory).
	reopen func() (kv, error)
	// recoverEvery is the least time between two recovery attempts.
	recoverEvery time.Duration
	// lastAttempt is when recovery was last attempted (UnixNano).
	lastAttempt atomic.Int64
	log         *slog.Logger

	life   sync.RWMutex
	closed bool // guarded by life

	// failed holds the write error that made the store's contents unknown.
	failed atomic.Pointer[error]

	// walLoss says why the store opened without acknowledged writes
	// (Options.AcceptWALLoss); set before the store is returned, then
	// only read. See walloss.go.
	walLoss string
	// auditDamage says which audit entry was found not to decode.
	auditDamage atomic.Pointer[string]

	// revision is the highest revision handed out or found at open.
	revision atomic.Uint64

	stripes [lockStripes]stripe

	stats writeStats
}

func newCore(engine kv) *core { return &core{kv: engine} }

// enter starts a call: it fails with ErrClosed or ErrFailed, or holds life
// for reading until the returned func runs. A failed store first tries to
// recover (see recover).
func (c *core) enter(ctx context.Context) (exit func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c.life.RLock()
		if c.closed {
			c.life.RUnlock()
			return nil, ErrClosed
		}
		f := c.failed.Load()
		if f == nil {
			return c.life.RUnlock, nil
		}
		c.life.RUnlock()
		if attempt > 0 || !c.tryRecover(ctx) {
			return nil, &recordError{sentinel: ErrFailed, cause: *f}
		}
	}
}

// Err implements [Store.Err].
func (c *core) Err(ctx context.Context) error {
	exit, err := c.enter(ctx)
	if err != nil {
		return err
	}
	exit()
	return nil
}

// tryRecover reopens the engine of a failed store, at most once per
// recoverEvery, and reports whether the store serves again. Everything the
// store cached is dropped: the engine's contents after a failed write are
// whatever it recovers at open (the failed commit applied or not, never a
// part of it), and every group actor that saw the failure reloads its group
// from there before it serves again. The store serves again only once a
// synced write succeeded after the reopen.
func (c *core) tryRecover(ctx context.Context) (ok bool) {
	if c.reopen == nil {
		return false
	}
	now := time.Now()
	last := c.lastAttempt.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < c.recoverEvery {
		return false
	}
	// A call stuck in the engine (a commit in Pebble's write stall, which
	// only a successful flush ends) holds life for reading: waiting for it
	// here would block every other call behind this one.
	if !c.life.TryLock() {
		return false
	}
	defer c.life.Unlock()
	if c.closed {
		return false
	}
	if c.failed.Load() == nil {
		return true
	}
	if last := c.lastAttempt.Load(); last != 0 && now.Sub(time.Unix(0, last)) < c.recoverEvery {
		return false
	}
	c.lastAttempt.Store(now.UnixNano())
	var err error
	defer func() {
		if r := recover(); r != nil {
			fe, isFatal := r.(*fatalError)
			if !isFatal {
				panic(r)
			}
			err, ok = fe, false
		}
		if err != nil && c.log != nil {
			c.log.Warn("store still failing; will retry", slog.Duration("after", c.recoverEvery), slog.String("error", err.Error()))
		}
	}()
	if !c.kvClosed {
		c.kvClosed = true
		if err := c.kv.close(); err != nil && c.log != nil {
			c.log.Info("closing the failed engine", slog.String("error", err.Error()))
		}
	}
	engine, err := c.reopened()
	if err != nil {
		return false
	}
	c.kv, c.kvClosed = engine, false
	for i := range c.stripes {
		c.stripes[i].revisions, c.stripes[i].staged = nil, nil
	}
	if err = c.open(ctx); err == nil {
		err = c.probe(ctx)
	}
	if err != nil {
		c.kvClosed = true
		_ = c.kv.close()
		return false
	}
	c.failed.Store(nil)
	if c.log != nil {
		c.log.Info("store recovered after a write error: engine reopened, a synced write succeeded")
	}
	return true
}

// openWait bounds how long a recovery attempt waits for the engine to
// reopen, holding life; a reopen that takes longer goes on in the
// background and a later attempt takes its result.
const openWait = time.Second

// closeReopenWait bounds how long Close waits for a reopen still running:
// Pebble's open waits for ever while the disk refuses tables, and the
// serve command gives up on closing after 10 s.
const closeReopenWait = 5 * time.Second

// reopenResult is what a reopen gave.
type reopenResult struct {
	kv  kv
	err error
}

// reopened returns the engine a reopen opened: one started now, waited
// for at most openWait, or one an earlier attempt started, not waited
// for. Pebble's Open waits until the memtables it replays from the log
// are flushed, for ever while the disk refuses tables: that must not hold
// the store's lock. Called with life held for writing.
func (c *core) reopened() (kv, error) {
	wait := time.Duration(0)
	if c.opening == nil {
		ch := make(chan reopenResult, 1)
		c.opening, wait = ch, openWait
		go func() {
			engine, err := c.reopen()
			ch <- reopenResult{engine, err}
		}()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-c.opening:
		c.opening = nil
		return r.kv, r.err
	case <-timer.C:
		return nil, errors.New("the engine is still reopening (Pebble flushes what it replays from its log before it opens)")
	}
}

// probe proves that a synced write succeeds: it rewrites the layout marker.
func (c *core) probe(ctx context.Context) error {
	payload, err := json.Marshal(layoutV1{KeyLayout: keyLayout})
	if err != nil {
		return err
	}
	return c.commit(ctx, putOp(layoutKey, frame(kindLayout, 1, payload)))
}

// diskError fails the store on a disk error of the engine's background
// work. Pebble retries a failed flush for ever and stalls commits once its
// memtables are full, so a store that went on would let its next writes
// hang, not fail; failed, it refuses calls at once and recovers as after a
// failed write (reopened, once a synced write succeeds). Called from one
// of Pebble's goroutines: it must not block.
func (c *core) diskError(err error) {
	c.fail(fmt.Errorf("background write: %w", err))
}

// fail makes the store refuse every later call. Called with the error of a
// write whose outcome is unknown. A write an engine certainly refused (a
// fence of the etcd engine: errRefused) is not such a write: it is returned
// as it is and the store goes on.
func (c *core) fail(err error) error {
	if _, ok := errors.AsType[*errRefused](err); ok {
		return err
	}
	if c.failed.CompareAndSwap(nil, &err) && c.log != nil {
		c.log.Error("store failed: every call is refused until the disk takes a synced write again",
			slog.String("error", err.Error()), slog.Duration("retryEvery", c.recoverEvery))
	}
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
		return groupHeadRevision(v, prefix, name)
	}
	return 0, fmt.Errorf("persistence: key %q outside the record key spaces", key)
}

// revisionToDelete returns the revision stored under key when a delete
// that expects revision expected may go on: the record exists and is at
// that revision. The caller holds the stripe st of key.
func (c *core) revisionToDelete(ctx context.Context, st *stripe, key []byte, what string, expected uint64) (uint64, error) {
	stored, err := c.storedRevision(ctx, st, key, what)
	switch {
	case err != nil:
		return 0, err
	case stored == 0:
		return 0, opErr(what, newErr(ErrNotFound, ""))
	case stored != expected:
		return 0, opErr(what, newErr(ErrStaleRevision, "at revision %d, the delete expected %d", stored, expected))
	}
	return stored, nil
}

// remember caches rev as the revision of key; the caller holds st.
func (st *stripe) remember(key []byte, rev uint64) {
	if st.revisions == nil {
		st.revisions = make(map[string]uint64)
	}
	st.revisions[string(key)] = rev
}

// observeLoaded raises the cached revision of key to rev, a revision just
// loaded, and the revision counter with it. In the cluster mode another
// replica may have written the record while this one did not own it; a
// record's revisions only grow, so a lower loaded one (a load racing a
// write of this process) changes nothing.
func (c *core) observeLoaded(key []byte, rev uint64) {
	if rev == 0 {
		return
	}
	c.observeRevision(rev)
	st := c.lock(key)
	defer st.mu.Unlock()
	if cur, ok := st.revisions[string(key)]; ok && cur < rev {
		st.revisions[string(key)] = rev
	}
}

// observeTombstone records that a load found the group of key deleted, by
// a tombstone written at revision rev. In the cluster mode another replica
// may have deleted the group while this one did not own it: a cached
// revision below the tombstone's is of the group before that delete, and
// a create here (expected revision 0) must not be refused as stale. A
// higher cached one is of a group this process wrote after the delete.
func (c *core) observeTombstone(key []byte, rev uint64) {
	if rev == 0 {
		return
	}
	c.observeRevision(rev)
	st := c.lock(key)
	defer st.mu.Unlock()
	if cur, ok := st.revisions[string(key)]; ok && cur != 0 && cur < rev {
		st.revisions[string(key)] = 0
	}
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
	if err == nil && expected == 0 && stored != 0 {
		// The cached revision may be of a record another process deleted
		// since (cluster mode: a stream deleted by the replica that ran
		// it): a create reads the engine before it is refused.
		delete(st.revisions, string(key))
		stored, err = c.storedRevision(ctx, st, key, what)
	}
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
		rec := decodeStreamValue(v, prefix)
		c.observeLoaded(k, rec.Revision)
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, opErr("load streams", err)
	}
	return out, nil
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

// DeleteStream implements [Store.DeleteStream].
func (c *core) DeleteStream(ctx context.Context, streamPrefix string, expected uint64) (err error) {
	if err := validStreamPrefix(streamPrefix); err != nil {
		return err
	}
	exit, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer exit()
	defer c.recoverFatal(&err)
	what := "stream " + streamPrefix
	key := streamKey(streamPrefix)
	st := c.lock(key)
	defer st.mu.Unlock()
	if _, err := c.revisionToDelete(ctx, st, key, what, expected); err != nil {
		return err
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
	if ch := c.opening; ch != nil {
		// An engine still reopening is closed once it opened: here if
		// that takes at most closeReopenWait (it holds the directory, and
		// the next open in this process must find it free), else later.
		closeReopened := func(r reopenResult) {
			if r.kv != nil {
				_ = r.kv.close()
			}
		}
		timer := time.NewTimer(closeReopenWait)
		select {
		case r := <-ch:
			closeReopened(r)
		case <-timer.C:
			go func() { closeReopened(<-ch) }()
		}
		timer.Stop()
	}
	if c.kvClosed {
		return nil
	}
	c.kvClosed = true
	defer c.recoverFatal(&err)
	return c.kv.close()
}
