package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rscoord/rscoord/assign"
)

// walFault injects errorfs.ErrInjected into operations on Pebble's
// write-ahead log (*.log, or the files named by suffix) while armed.
type walFault struct {
	armed atomic.Bool
	kinds []errorfs.OpKind
	hits  atomic.Int32
	// err is the error injected; errorfs.ErrInjected when nil.
	err error
	// allFiles extends the fault from the WAL to every file.
	allFiles bool
	// suffix, when set, names the files that fail instead of ".log".
	suffix string
	// hit is signalled (without blocking) after every injected error.
	hit chan struct{}
}

func newWALFault(kinds []errorfs.OpKind) *walFault {
	return &walFault{kinds: kinds, hit: make(chan struct{}, 1)}
}

// awaitHits waits until the fault was hit n more times than now.
func (f *walFault) awaitHits(t *testing.T, n int32) {
	t.Helper()
	target := f.hits.Load() + n
	timeout := time.After(10 * time.Second)
	for f.hits.Load() < target {
		select {
		case <-f.hit:
		case <-timeout:
			t.Fatalf("the fault was hit %d times, want %d", f.hits.Load(), target)
		}
	}
}

func (f *walFault) MaybeError(op errorfs.Op) error {
	suffix := f.suffix
	if suffix == "" {
		suffix = ".log"
	}
	if !f.armed.Load() || (!f.allFiles && !strings.HasSuffix(op.Path, suffix)) {
		return nil
	}
	for _, k := range f.kinds {
		if op.Kind == k {
			f.hits.Add(1)
			select {
			case f.hit <- struct{}{}:
			default:
			}
			if f.err != nil {
				return f.err
			}
			return errorfs.ErrInjected
		}
	}
	return nil
}

func (f *walFault) String() string { return fmt.Sprintf("wal fault %v", f.kinds) }

// TestWriteErrorFailsThenRecovers: a WAL write or sync error is reported by
// SaveGroup (never a success); the store refuses every call while writes
// keep failing, and once they succeed again it reopens Pebble by itself and
// serves the last write reported durable, without a new process.
func TestWriteErrorFailsThenRecovers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		kinds []errorfs.OpKind
		// lost: the failed write never reached the file, so after recovery
		// the group must be at the previous revision. A failed sync gives
		// no such promise either way.
		lost bool
	}{
		{"write", []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileWriteAt}, true},
		{"sync", []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fault := &walFault{kinds: c.kinds}
			// Every call is a recovery attempt (RecoverInterval 1 ns), so
			// the test waits on attempts, not on time.
			s, err := OpenPebble(dir, Options{Logger: testLogger(t), fs: errorfs.Wrap(vfs.Default, fault), RecoverInterval: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			g := richGroup("orders", "g")
			rev := mustSaveGroup(t, s, g, 0)
			other := mustSaveGroup(t, s, richGroup("orders", "other"), 0)

			fault.armed.Store(true)
			g.GroupEpoch = 99
			next, err := s.SaveGroup(ctx, g, nil, rev)
			if err == nil || next != 0 {
				t.Fatalf("SaveGroup with a failing WAL %s = %d, %v; want an error", c.name, next, err)
			}
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("SaveGroup error %v does not wrap ErrFailed", err)
			}
			if fault.hits.Load() == 0 {
				t.Fatal("the fault was never hit")
			}
			// While writes keep failing, nothing is served, also after
			// several recovery attempts.
			for range 3 {
				if _, err := s.LoadGroup(ctx, "orders", "g"); !errors.Is(err, ErrFailed) {
					t.Fatalf("LoadGroup while the WAL fails: %v", err)
				}
				if err := s.Err(ctx); !errors.Is(err, ErrFailed) {
					t.Fatalf("Err while the WAL fails: %v", err)
				}
			}

			fault.armed.Store(false)
			awaitRecovered(t, s)
			rec := mustLoadGroup(t, s, "orders", "g")
			if c.lost && (rec.Revision != rev || rec.Group.GroupEpoch != 42) {
				t.Fatalf("after recovery: revision %d epoch %d, want the last durable revision %d epoch 42",
					rec.Revision, rec.Group.GroupEpoch, rev)
			}
			r2 := mustSaveGroup(t, s, rec.Group, rec.Revision)
			if r2 <= rev || r2 <= other {
				t.Fatalf("revision after recovery %d not above %d, %d", r2, rev, other)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := openTestPebble(t, dir)
			if got := mustLoadGroup(t, s2, "orders", "g"); got.Revision != r2 {
				t.Fatalf("after reopen: revision %d, want %d", got.Revision, r2)
			}
		})
	}
}

// nonFatalLogger is a Pebble logger whose Fatalf returns, as a naive slog
// adapter's would.
type nonFatalLogger struct{ fatals atomic.Int32 }

func (*nonFatalLogger) Infof(string, ...any)    {}
func (*nonFatalLogger) Errorf(string, ...any)   {}
func (l *nonFatalLogger) Fatalf(string, ...any) { l.fatals.Add(1) }

// TestPebbleFatalfMustNotReturn pins the Pebble behaviour pebbleLogger is
// built around: when the WAL write of a synced Set fails, DB.Apply calls
// Logger.Fatalf and then returns nil, and the unsynced value is readable.
// If this test fails, Pebble changed and pebbleLogger.Fatalf may be revisited.
func TestPebbleFatalfMustNotReturn(t *testing.T) {
	t.Parallel()
	fault := &walFault{kinds: []errorfs.OpKind{errorfs.OpFileWrite}}
	logger := &nonFatalLogger{}
	db, err := pebble.Open(t.TempDir(), &pebble.Options{FS: errorfs.Wrap(vfs.Default, fault), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	fault.armed.Store(true)
	setErr := db.Set([]byte("k"), []byte("v"), pebble.Sync)
	v, closer, getErr := db.Get([]byte("k"))
	if getErr == nil {
		v = append([]byte(nil), v...)
		_ = closer.Close()
	}
	fault.armed.Store(false)
	_ = db.Close()
	if logger.fatals.Load() == 0 || setErr != nil || string(v) != "v" {
		t.Fatalf("fatals %d, Set error %v, Get %q %v: Pebble no longer reports a failed WAL write only through Fatalf",
			logger.fatals.Load(), setErr, v, getErr)
	}
}

func TestOpenRefusesUnknownKeyLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTestPebble(t, dir)
	v := frame(kindLayout, 1, []byte(`{"keyLayout":3}`))
	if err := s.db().Set(layoutKey, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPebble(dir, Options{Logger: testLogger(t)}); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("open with key layout 3: %v, want ErrUnknownSchema", err)
	}
}

func TestOpenRefusesADirectoryInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openTestPebble(t, dir)
	if s, err := OpenPebble(dir, Options{Logger: testLogger(t)}); err == nil {
		_ = s.Close()
		t.Fatal("a second open of the same directory succeeded")
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	o := Options{}.EnsureDefaults()
	if o.Logger == nil || o.CacheSize != DefaultCacheSize || o.MemTableSize != DefaultMemTableSize || o.fs == nil {
		t.Fatalf("defaults not filled: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	err := Options{CacheSize: -1, MemTableSize: math.MaxUint32}.Validate()
	if err == nil || !strings.Contains(err.Error(), "CacheSize") || !strings.Contains(err.Error(), "MemTableSize") {
		t.Fatalf("Validate = %v, want both problems", err)
	}
	if _, err := OpenPebble(t.TempDir(), Options{CacheSize: -1}); err == nil {
		t.Fatal("OpenPebble accepted invalid options")
	}
}

// recordingHandler keeps every log record.
type recordingHandler struct {
	mu      sync.Mutex
	records []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func TestPebbleLogsGoToTheLogger(t *testing.T) {
	t.Parallel()
	h := &recordingHandler{}
	s, err := OpenPebble(t.TempDir(), Options{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.records) == 0 {
		t.Fatal("Pebble logged nothing through Options.Logger")
	}
}

// TestCloseWaitsForCallsInFlight: Close never closes Pebble under a running
// call (Pebble panics on use after close).
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	t.Parallel()
	s := openTestPebble(t, t.TempDir())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			g := &assign.Group{StreamPrefix: "orders", Name: fmt.Sprint("g", w)}
			var rev uint64
			for {
				next, err := s.SaveGroup(ctx, g, nil, rev)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				rev = next
			}
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// BenchmarkSaveGroupParallel shows Pebble's commit pipeline sharing fsyncs
// between concurrent group writers: compare ns/op with -cpu 1 and with
// -cpu 64 (or SetParallelism).
func BenchmarkSaveGroupParallel(b *testing.B) {
	s, err := OpenPebble(b.TempDir(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int32
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		g := richGroup("orders", fmt.Sprint("g", n.Add(1)))
		var rev uint64
		for pb.Next() {
			next, err := s.SaveGroup(context.Background(), g, nil, rev)
			if err != nil {
				b.Error(err)
				return
			}
			rev = next
		}
	})
}

// BenchmarkSaveGroupSerial is one group writer: one fsync per save.
func BenchmarkSaveGroupSerial(b *testing.B) {
	s, err := OpenPebble(b.TempDir(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g := richGroup("orders", "g")
	var rev uint64
	for b.Loop() {
		next, err := s.SaveGroup(context.Background(), g, nil, rev)
		if err != nil {
			b.Fatal(err)
		}
		rev = next
	}
}
