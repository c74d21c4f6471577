package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure [OpenPebble]. The zero value is usable: [Options.EnsureDefaults]
// fills every zero field.
type Options struct {
	// Logger receives Pebble's log lines (with component=pebble) at INFO and
	// ERROR. Without it Pebble would print through the standard log package.
	// Pebble's fatal errors (a failed WAL write or sync, a failed MANIFEST
	// write) are logged at ERROR and then panic instead of exiting the
	// process: in the goroutine of a store call the panic is recovered and
	// the store fails ([ErrFailed]); in one of Pebble's background goroutines
	// it ends the process, as Pebble's default os.Exit(1) would.
	// Default: [slog.Default].
	Logger *slog.Logger

	// CacheSize is the size in bytes of Pebble's block cache. The store is
	// read in full at start and then served from the group actors' memory,
	// so more cache buys little. Default 8 MiB; must not be negative.
	CacheSize int64

	// MemTableSize is the size in bytes of one Pebble memtable. Larger
	// memtables flush less often but make the write-ahead log replayed at
	// open longer. Default 4 MiB; must be below 4 GiB (Pebble's limit).
	MemTableSize uint64

	// RecoverInterval is the least time between two attempts to recover
	// from a failed write (a full disk, an I/O error): the store then
	// reopens its engine and serves again once a synced write succeeds.
	// Until then every call fails with [ErrFailed]. Default 1 s.
	RecoverInterval time.Duration

	// AcceptWALLoss opens a store whose write-ahead log is damaged before
	// its last record (or missing), without the acknowledged writes from
	// the damage on, instead of refusing it. The open logs an ERROR, keeps
	// a copy of the logs as found (a wal-loss-<time> directory in the data
	// directory), appends an ACCEPT_WAL_LOSS audit entry, and the store
	// reports itself degraded ([Store.Health]) for as long as it is opened
	// with this option; the first clean open without it clears that. The
	// serve command's --accept-wal-loss sets it. A torn last record (a
	// write cut by a crash) is not damage and needs no option.
	AcceptWALLoss bool

	// fs is the file system Pebble uses; tests wrap it to inject I/O errors.
	// Default vfs.Default.
	fs vfs.FS

	// lock is Pebble's directory lock, taken by OpenPebble before it reads
	// the write-ahead logs and held until the store is closed.
	lock *pebble.Lock

	// onDiskError is called with a disk error of Pebble's background work
	// (a flush or compaction that could not write); set by OpenPebble.
	onDiskError func(error)
}

// Defaults of [Options].
const (
	DefaultCacheSize       int64  = 8 << 20
	DefaultMemTableSize    uint64 = 4 << 20
	DefaultRecoverInterval        = time.Second
)

// EnsureDefaults returns o with every zero field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.RecoverInterval == 0 {
		o.RecoverInterval = DefaultRecoverInterval
	}
	if o.fs == nil {
		o.fs = vfs.Default
	}
	return o
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if o.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("persistence: CacheSize %d is negative", o.CacheSize))
	}
	if o.RecoverInterval < 0 {
		errs = append(errs, fmt.Errorf("persistence: RecoverInterval %v is negative", o.RecoverInterval))
	}
	if o.MemTableSize >= math.MaxUint32 {
		errs = append(errs, fmt.Errorf("persistence: MemTableSize %d is not below 4 GiB", o.MemTableSize))
	}
	return errors.Join(errs...)
}
