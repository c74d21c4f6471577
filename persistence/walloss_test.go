package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// walLossEnv names the data directory TestHelperAcksAndDies writes.
const walLossEnv = "RSCOORD_PERSISTENCE_WALLOSS_DIR"

// ackedCreates is how many streams the helper creates before it dies.
const ackedCreates = 60

// TestHelperAcksAndDies is not a test of its own: run by killedAfterAcks
// in a child process, it opens the store in the directory walLossEnv
// names, creates ackedCreates streams (each acknowledged: synced) and then
// SIGKILLs itself, so nothing is flushed or closed.
func TestHelperAcksAndDies(t *testing.T) {
	dir := os.Getenv(walLossEnv)
	if dir == "" {
		t.Skip("only run as the helper process of the write-ahead log tests")
	}
	s, err := OpenPebble(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Printf("open: %v\n", err)
		os.Exit(2)
	}
	for i := range ackedCreates {
		if _, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: fmt.Sprintf("s%02d", i), ShardCount: 4, MetadataVersion: 1, CreatedAt: t0}, 0); err != nil {
			fmt.Printf("save: %v\n", err)
			os.Exit(2)
		}
	}
	fmt.Printf("acked %d\n", ackedCreates)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// killedAfterAcks returns a data directory whose writer acknowledged
// ackedCreates stream creations and was then killed with SIGKILL, and its
// one write-ahead log.
func killedAfterAcks(t *testing.T) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAcksAndDies$", "-test.count=1")
	cmd.Env = append(os.Environ(), walLossEnv+"="+dir)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper: %v, want it killed by SIGKILL; output:\n%s", err, out)
	}
	if want := fmt.Sprintf("acked %d\n", ackedCreates); string(out) != want {
		t.Fatalf("helper printed %q, want %q", out, want)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("write-ahead logs after the kill: %v %v, want one", logs, err)
	}
	return dir, logs[0]
}

// flipBytes inverts 16 bytes of path at the given fraction of its size.
func flipBytes(t *testing.T, path string, at float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int(float64(len(b)) * at)
	for i := off; i < off+16; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, fileMode); err != nil {
		t.Fatal(err)
	}
}

// logRecorder keeps every log record at WARN and above, and passes every
// record to the test log.
type logRecorder struct {
	slog.Handler
	mu      *sync.Mutex
	records *[]string
}

func newLogRecorder(t *testing.T) (*slog.Logger, func() []string) {
	r := logRecorder{Handler: testLogger(t).Handler(), mu: &sync.Mutex{}, records: new([]string)}
	return slog.New(r), func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]string(nil), *r.records...)
	}
}

func (r logRecorder) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		line := rec.Level.String() + " " + rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		r.mu.Lock()
		*r.records = append(*r.records, line)
		r.mu.Unlock()
	}
	return r.Handler.Handle(ctx, rec)
}

func (r logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return logRecorder{Handler: r.Handler.WithAttrs(as), mu: r.mu, records: r.records}
}

func (r logRecorder) WithGroup(name string) slog.Handler {
	return logRecorder{Handler: r.Handler.WithGroup(name), mu: r.mu, records: r.records}
}

func countStreams(t *testing.T, s Store) int {
	t.Helper()
	recs, err := s.LoadStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Err != nil || r.StreamPrefix != fmt.Sprintf("s%02d", i) {
			t.Fatalf("stream %d: %+v; want s%02d, the streams a prefix of those created", i, r, i)
		}
	}
	return len(recs)
}

// TestWALDamagedInTheMiddleRefusesToOpen: a write-ahead log damaged before
// its last record (16 bytes flipped at 30 % of it, after a SIGKILL) makes
// the open fail, naming the log, the offset and the option that accepts
// the loss, and leaves the log as it was.
func TestWALDamagedInTheMiddleRefusesToOpen(t *testing.T) {
	t.Parallel()
	dir, log := killedAfterAcks(t)
	flipBytes(t, log, 0.3)
	before, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenPebble(dir, Options{Logger: testLogger(t)})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open of a damaged log: %v, want ErrCorrupt", err)
	}
	for _, want := range []string{log, "damaged at offset", "--accept-wal-loss"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("open error %q does not name %q", err, want)
		}
	}
	if after, err := os.ReadFile(log); err != nil || string(after) != string(before) {
		t.Fatalf("a refused open changed the log (%v)", err)
	}
}

// TestWALDamagedOpensDegradedWithAcceptWALLoss: with AcceptWALLoss the
// damaged store opens without the writes from the damage on, logs an
// ERROR naming the log, keeps a copy of it, writes an audit entry and
// reports itself degraded; it stays degraded while opened with the option
// and is healthy after a clean open without it.
func TestWALDamagedOpensDegradedWithAcceptWALLoss(t *testing.T) {
	t.Parallel()
	dir, log := killedAfterAcks(t)
	flipBytes(t, log, 0.3)
	damaged, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	logger, records := newLogRecorder(t)
	s, err := OpenPebble(dir, Options{Logger: logger, AcceptWALLoss: true})
	if err != nil {
		t.Fatalf("open with AcceptWALLoss: %v", err)
	}
	if n := countStreams(t, s); n == 0 || n >= ackedCreates {
		t.Fatalf("%d streams after the loss; want some, and fewer than the %d acknowledged", n, ackedCreates)
	}
	var errorLine string
	for _, l := range records() {
		if strings.HasPrefix(l, "ERROR") && strings.Contains(l, log) && strings.Contains(l, "--accept-wal-loss") {
			errorLine = l
		}
	}
	if errorLine == "" {
		t.Fatalf("no ERROR line names the log and the option; WARN and above: %q", records())
	}
	if degraded, reason := s.Health(); !degraded || !strings.Contains(reason, log) {
		t.Fatalf("health after the accepted loss: degraded %v (%q), want degraded naming %s", degraded, reason, log)
	}
	audit, err := s.ListAudit(ctx, AuditQuery{Limit: 1})
	if err != nil || len(audit) != 1 || audit[0].Entry.Operation != protocol.AuditAcceptWALLoss || !strings.Contains(audit[0].Entry.Reason, log) {
		t.Fatalf("newest audit entry: %+v %v; want %s naming the log", audit, err, protocol.AuditAcceptWALLoss)
	}
	kept, err := filepath.Glob(filepath.Join(dir, "wal-loss-*", filepath.Base(log)))
	if err != nil || len(kept) != 1 {
		t.Fatalf("copies of the damaged log: %v %v, want one", kept, err)
	}
	if b, err := os.ReadFile(kept[0]); err != nil || string(b) != string(damaged) {
		t.Fatalf("the copy %s is not the log as found (%v)", kept[0], err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenPebble(dir, Options{Logger: testLogger(t), AcceptWALLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	if degraded, reason := s.Health(); !degraded || !strings.Contains(reason, "restart without --accept-wal-loss") {
		t.Fatalf("health at the next open with the option: degraded %v (%q), want degraded", degraded, reason)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenPebble(dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("clean open without the option: %v", err)
	}
	defer s.Close()
	if degraded, reason := s.Health(); degraded {
		t.Fatalf("health after a clean open without the option: degraded (%s), want healthy", reason)
	}
}

// TestWALTornLastRecordOpensCleanly: a log cut in the middle of its last
// record (a write a crash cut short, never acknowledged) opens without the
// option and healthy, with every record before it, and says so at WARN; a
// log a SIGKILL left whole opens with every acknowledged write and no
// warning.
func TestWALTornLastRecordOpensCleanly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cut     int64
		streams int
		warning bool
	}{
		{"whole", 0, ackedCreates, false},
		{"torn last record", 40, ackedCreates - 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, log := killedAfterAcks(t)
			if tc.cut > 0 {
				st, err := os.Stat(log)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(log, st.Size()-tc.cut); err != nil {
					t.Fatal(err)
				}
			}
			logger, records := newLogRecorder(t)
			s, err := OpenPebble(dir, Options{Logger: logger})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer s.Close()
			if n := countStreams(t, s); n != tc.streams {
				t.Fatalf("%d streams, want %d", n, tc.streams)
			}
			if degraded, reason := s.Health(); degraded {
				t.Fatalf("health: degraded (%s), want healthy", reason)
			}
			warned := false
			for _, l := range records() {
				warned = warned || strings.Contains(l, "torn record") && strings.Contains(l, log)
			}
			if warned != tc.warning || len(records()) != map[bool]int{false: 0, true: 1}[tc.warning] {
				t.Fatalf("WARN and above: %q; want a torn-record warning: %v", records(), tc.warning)
			}
		})
	}
}

// TestWALDeletedRefusesToOpen: a database whose write-ahead log was
// deleted after acknowledged writes is refused, and opens degraded with
// AcceptWALLoss.
func TestWALDeletedRefusesToOpen(t *testing.T) {
	t.Parallel()
	dir, log := killedAfterAcks(t)
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	_, err := OpenPebble(dir, Options{Logger: testLogger(t)})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "write-ahead log is missing") || !strings.Contains(err.Error(), "--accept-wal-loss") {
		t.Fatalf("open without the log: %v, want ErrCorrupt saying the log is missing and naming --accept-wal-loss", err)
	}
	s, err := OpenPebble(dir, Options{Logger: testLogger(t), AcceptWALLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if degraded, reason := s.Health(); !degraded || !strings.Contains(reason, "missing") {
		t.Fatalf("health: degraded %v (%q), want degraded", degraded, reason)
	}
}
