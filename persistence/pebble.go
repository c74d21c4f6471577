package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// formatMajorVersion pins Pebble's on-disk format. Pebble ratchets a store
// forward to Options.FormatMajorVersion at open and never back, and older
// Pebble builds refuse newer formats; pinning it means that upgrading the
// Pebble dependency does not silently make a data directory unreadable for
// the previous rscoord build. Raise it deliberately.
const formatMajorVersion = pebble.FormatValueSeparation

// PebbleStore is the embedded, durable [Store]: one Pebble database in a
// directory. Every write is synced to Pebble's write-ahead log before it
// returns; writes of different records run concurrently so that Pebble's
// commit pipeline shares one fsync between them.
type PebbleStore struct {
	*core
	dir    string
	lock   *pebble.Lock
	unlock sync.Once
}

var _ Store = (*PebbleStore)(nil)

// OpenPebble opens (creating if needed) the store in dir. It refuses a
// directory written with an unknown key layout ([ErrUnknownSchema]), one
// that lost acknowledged state where that can be told (tables or logs
// without the manifest marker that names them, fewer revisions than at its
// last clean close, a write-ahead log damaged before its last record or
// missing: [ErrCorrupt], the last unless Options.AcceptWALLoss; see
// walloss.go), and one that another process holds open (Pebble's lock
// file; the error names the holder's pid from the pid file beside it). The
// directory is made 0700 and every file in it 0600.
//
// A store of key layout 1 is migrated at open (see [core.migrate]).
func OpenPebble(dir string, opts Options) (store *PebbleStore, err error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := prepareDir(dir); err != nil {
		return nil, opErr("open "+dir, err)
	}
	fs := privateFS{opts.fs}
	c := newCore(nil)
	c.log = opts.Logger.With(slog.String("dataDir", dir))
	c.recoverEvery = opts.RecoverInterval
	opts.onDiskError = c.diskError
	// The logs are read under Pebble's lock, so that no other process
	// writes them meanwhile; Pebble's open then uses that lock.
	if err := mkdirSynced(fs, dir); err != nil {
		return nil, opErr("open "+dir, err)
	}
	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		if isLockError(err) {
			err = fmt.Errorf("the data directory is in use by %s: %w", pidFileHolder(dir), err)
		}
		return nil, opErr("open "+dir, err)
	}
	opts.lock = lock
	defer func() {
		if store == nil {
			err = errors.Join(err, lock.Close())
		}
	}()
	damage, err := findWALDamage(fs, dir)
	if err != nil {
		return nil, opErr("open "+dir+": check the write-ahead logs", err)
	}
	if damage != nil && damage.torn {
		c.log.Warn("the newest write-ahead log ends in a torn record, a write cut by a crash before it was acknowledged; Pebble drops it",
			slog.String("log", damage.path), slog.Int64("offset", damage.offset), slog.Int64("size", damage.size))
		damage = nil
	}
	now := time.Now()
	var kept string
	if damage != nil {
		if !opts.AcceptWALLoss {
			return nil, opErr("open "+dir, damage.refusal())
		}
		if kept, err = keepWALTail(fs, dir, damage, now); err != nil {
			return nil, opErr("open "+dir+": cut the damaged write-ahead log", err)
		}
	}
	if damage == nil && !hasDatabase(fs, dir) {
		// Pebble writes the first log of a new database before it raises
		// the format version, in a format without the synced offsets that
		// tell damage from a torn tail (see walcheck.go). Opened once
		// empty, the database logs every acknowledged write with them.
		first, err := openPebbleKV(dir, fs, opts)
		if err == nil {
			err = first.close()
		}
		if err != nil {
			return nil, opErr("open "+dir, err)
		}
	}
	engine, err := openPebbleKV(dir, fs, opts)
	if err != nil {
		return nil, opErr("open "+dir, err)
	}
	c.kv = engine
	if err := writePIDFile(dir); err != nil {
		return nil, errors.Join(opErr("open "+dir, err), engine.close())
	}
	c.reopen = func() (kv, error) {
		// Pebble leaves a goroutine behind when Open fails part-way (it
		// registers its compaction scheduler first), so a recovery opens
		// it only once a synced write to the directory succeeds.
		if err := probeDisk(fs, dir); err != nil {
			return nil, err
		}
		return openPebbleKV(dir, fs, opts)
	}
	err = c.open(context.Background())
	if err == nil {
		var floor uint64
		floor, err = checkFloor(dir, c.revision.Load())
		if damage != nil && errors.Is(err, ErrCorrupt) && floor > 0 {
			// The loss is accepted; revisions go on above every one
			// handed out before it.
			c.observeRevision(floor)
			err = nil
		}
	}
	if err == nil {
		if damage != nil {
			c.openedAfterLoss(damage, kept, now)
		} else {
			err = c.reportEarlierLoss(dir, opts.AcceptWALLoss)
		}
	}
	if err != nil {
		return nil, errors.Join(opErr("open "+dir, err), c.kv.close(), removePIDFile(dir))
	}
	return &PebbleStore{core: c, dir: dir, lock: lock}, nil
}

// Close implements [Store.Close]. A store that closes cleanly records the
// highest revision it handed out, in the store and in a file beside it, so
// that the next open notices acknowledged writes that went missing in
// between (see checkFloor); then it removes the pid file.
func (s *PebbleStore) Close() error {
	floor, floorErr := s.core.writeFloor()
	err := s.core.Close()
	if floorErr == nil && err == nil && floor > 0 {
		err = writeFloorFile(s.dir, floor)
	}
	err = errors.Join(err, removePIDFile(s.dir))
	// The database holds a reference of its own to the lock (Pebble
	// releases the file lock once both are gone), so a database that
	// failed to close keeps the directory locked.
	s.unlock.Do(func() { err = errors.Join(err, s.lock.Close()) })
	return err
}

// db is the current Pebble database (a recovery replaces it).
func (s *PebbleStore) db() *pebble.DB {
	s.life.RLock()
	defer s.life.RUnlock()
	return s.kv.(*pebbleKV).db
}

// openPebbleKV opens the Pebble database in dir. A fatal error during open
// (Pebble's Fatalf) is returned, not raised.
func openPebbleKV(dir string, fs vfs.FS, opts Options) (kv *pebbleKV, err error) {
	logger := pebbleLogger{opts.Logger.With("component", "pebble")}
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	bgErrors := &rareLog{every: backgroundErrorLogEvery}
	popts := &pebble.Options{
		FS:                 fs,
		Lock:               opts.lock,
		Cache:              cache,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: formatMajorVersion,
		Logger:             logger,
		EventListener: &pebble.EventListener{
			// A flush or compaction that fails is retried at once, again
			// and again (Pebble has no backoff), and commits stall once
			// the memtables are full: on a disk error the store fails
			// (see core.diskError) rather than let writes hang, and the
			// log gets the first error and then a count now and then.
			BackgroundError: func(err error) {
				if n, ok := bgErrors.due(); ok {
					logger.l.Error("background error", slog.Int("repeats", n), slog.String("err", err.Error()))
				}
				if opts.onDiskError != nil && isDiskError(err) {
					opts.onDiskError(err)
				}
			},
			// Pebble's default treats corruption as fatal. The read that
			// found it returns an error as well, which the store reports
			// for the record concerned, so logging is enough here.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				logger.l.Error("data corruption", "path", info.Path, "err", info.Details)
			},
			DiskSlow: func(info pebble.DiskSlowInfo) {
				logger.l.Warn("disk slow", "path", info.Path, "op", info.OpType.String(), "duration", info.Duration)
			},
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				logger.l.Warn("write stall begins", "reason", info.Reason)
			},
			WriteStallEnd: func() { logger.l.Info("write stall ends") },
		},
	}
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			kv, err = nil, fe
		}
	}()
	db, err := pebble.Open(dir, popts)
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("the data directory is in use by %s: %w", pidFileHolder(dir), err)
		}
		return nil, corruption(err)
	}
	return &pebbleKV{db: db}, nil
}

// backgroundErrorLogEvery is the least time between two log lines of
// Pebble's background errors.
const backgroundErrorLogEvery = 10 * time.Second

// rareLog lets through one of a run of events per interval and counts the
// others.
type rareLog struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// due reports whether to log now and how many events were not logged
// since the last time.
func (r *rareLog) due() (suppressed int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); r.last.IsZero() || now.Sub(r.last) >= r.every {
		n := r.suppressed
		r.last, r.suppressed = now, 0
		return n, true
	}
	r.suppressed++
	return 0, false
}

// isDiskError reports whether err is the disk refusing writes: full, over
// quota, read-only or failing.
func isDiskError(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// pebbleKV is the kv of a Pebble database.
type pebbleKV struct {
	db *pebble.DB
}

func (p *pebbleKV) get(_ context.Context, key []byte) ([]byte, error) {
	v, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errNoKey
	}
	if err != nil {
		return nil, corruption(err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// commit applies ops as one Pebble batch, synced.
func (p *pebbleKV) commit(_ context.Context, ops []op) error {
	b := p.db.NewBatch()
	defer b.Close()
	for _, o := range ops {
		var err error
		if o.del {
			err = b.Delete(o.key, nil)
		} else {
			err = b.Set(o.key, o.value, nil)
		}
		if err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

func (p *pebbleKV) limits() kvLimits { return kvLimits{MaxBytes: maxCommitBytes} }

// scan iterates one Pebble iterator, which reads as of its creation.
func (p *pebbleKV) scan(_ context.Context, lower, upper []byte, fn func(key, value []byte) error) (err error) {
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return corruption(err)
	}
	defer func() { err = errors.Join(err, corruption(it.Close())) }()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return corruption(err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	return corruption(it.Error())
}

// scanReverse is scan from the last key down.
func (p *pebbleKV) scanReverse(_ context.Context, lower, upper []byte, fn func(key, value []byte) error) (err error) {
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return corruption(err)
	}
	defer func() { err = errors.Join(err, corruption(it.Close())) }()
	for valid := it.Last(); valid; valid = it.Prev() {
		v, err := it.ValueAndErr()
		if err != nil {
			return corruption(err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	return corruption(it.Error())
}

// close closes the database; a Pebble whose commit pipeline broke may
// panic (Fatalf) or fail here, which is returned.
func (p *pebbleKV) close() (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			err = fe
		}
	}()
	return p.db.Close()
}

// corruption marks Pebble's corruption errors (a failed block checksum) with
// ErrCorrupt so that callers fail closed on them as on a corrupt record.
func corruption(err error) error {
	if err != nil && pebble.IsCorruptionError(err) {
		return &recordError{sentinel: ErrCorrupt, detail: "pebble", cause: err}
	}
	return err
}

// fatalError is what pebbleLogger.Fatalf panics with.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return "pebble fatal error: " + e.msg }

// pebbleLogger routes Pebble's logging to slog. Fatalf must not return:
// Pebble calls it where it cannot go on (after a failed WAL write or sync
// DB.Apply calls Fatalf and then returns nil, which would report the
// unsynced write as a success). It panics with *fatalError; the store
// recovers that in its own calls and fails (see core.recoverFatal).
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) { p.l.Info(fmt.Sprintf(format, args...)) }

func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Error(fmt.Sprintf(format, args...)) }

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "fatal", true)
	panic(&fatalError{msg: msg})
}
