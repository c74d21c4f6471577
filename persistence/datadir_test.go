package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestDataDirIsPrivate: a new data directory is 0700 with 0600 files, and
// an existing one written with laxer modes is tightened at open.
func TestDataDirIsPrivate(t *testing.T) {
	t.Parallel()
	check := func(dir string) {
		t.Helper()
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("data dir mode %v, want 0700", fi.Mode().Perm())
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) < 3 {
			t.Fatalf("only %d files in the data dir", len(entries))
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().IsRegular() && info.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v, want 0600", e.Name(), info.Mode().Perm())
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	s := openTestPebble(t, dir)
	for i := range 50 {
		mustSaveGroup(t, s, richGroup("orders", fmt.Sprint("g", i)), 0)
	}
	if err := s.db().Flush(); err != nil {
		t.Fatal(err)
	}
	check(dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// An old directory with world-readable files is tightened.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if err := os.Chmod(filepath.Join(dir, e.Name()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	openTestPebble(t, dir) // tightens on open; the test's cleanup closes it
	check(dir)
}

// TestSecondOpenNamesTheHolder: a second open of a held directory says
// which process holds it.
func TestSecondOpenNamesTheHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTestPebble(t, dir)
	_, err := OpenPebble(dir, Options{Logger: testLogger(t)})
	if err == nil {
		t.Fatal("a second open of a held directory succeeded")
	}
	if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Fatalf("second open: %v; want it to name %q", err, want)
	}
	// The failed open left the holder's pid file alone.
	if b, err := os.ReadFile(filepath.Join(dir, pidFileName)); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("pid file after a refused open: %q, %v", b, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pidFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid file after close: %v", err)
	}
}

// TestOpenRefusesADirThatLostState: a directory whose manifest marker is
// gone (Pebble would start empty beside the old tables) and one whose
// write-ahead log has flipped bytes before its end are refused with
// ErrCorrupt, not opened with data missing.
func TestOpenRefusesADirThatLostState(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, flush bool) string {
		dir := t.TempDir()
		s := openTestPebble(t, dir)
		for i := range 40 {
			mustSaveGroup(t, s, richGroup("orders", fmt.Sprint("g", i)), 0)
		}
		if flush {
			if err := s.db().Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("manifest marker missing", func(t *testing.T) {
		dir := write(t, true)
		markers, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*"))
		if len(markers) == 0 {
			t.Fatal("no manifest marker written")
		}
		for _, m := range markers {
			if err := os.Remove(m); err != nil {
				t.Fatal(err)
			}
		}
		_, err := OpenPebble(dir, Options{Logger: testLogger(t)})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "manifest marker") {
			t.Fatalf("open without a manifest marker: %v; want ErrCorrupt naming the marker", err)
		}
	})
	t.Run("flipped WAL bytes", func(t *testing.T) {
		dir := write(t, false)
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var wal string
		var size int64
		for _, l := range logs {
			if fi, err := os.Stat(l); err == nil && fi.Size() > size {
				wal, size = l, fi.Size()
			}
		}
		if size < 4096 {
			t.Fatalf("largest WAL is %d bytes", size)
		}
		b, err := os.ReadFile(wal)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/3] ^= 0xff
		if err := os.WriteFile(wal, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = OpenPebble(dir, Options{Logger: testLogger(t)})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open with flipped WAL bytes: %v; want ErrCorrupt", err)
		}
	})
}

// TestDiskFullRecovers: the disk fills (every write of the write-ahead log
// fails with ENOSPC), saves fail and the store refuses calls; once space is
// back, the store serves again by itself with the last durable state.
func TestDiskFullRecovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fault := &walFault{kinds: []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpCreate},
		err: syscall.ENOSPC, allFiles: true}
	// Every call is a recovery attempt (RecoverInterval 1 ns), so the test
	// waits on attempts, not on time.
	s, err := OpenPebble(dir, Options{Logger: testLogger(t), fs: errorfs.Wrap(vfs.Default, fault), RecoverInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := richGroup("orders", "g")
	rev := mustSaveGroup(t, s, g, 0)
	fault.armed.Store(true)
	for i := range 5 {
		g.GroupEpoch++
		if _, err := s.SaveGroup(ctx, g, nil, rev); !errors.Is(err, ErrFailed) {
			t.Fatalf("save %d on a full disk: %v; want ErrFailed", i, err)
		}
	}
	if err := s.Err(ctx); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Err on a full disk: %v", err)
	}
	fault.armed.Store(false)
	awaitRecovered(t, s)
	rec := mustLoadGroup(t, s, "orders", "g")
	if rec.Revision != rev || rec.Group.GroupEpoch != 42 {
		t.Fatalf("after recovery: revision %d epoch %d; want %d, 42", rec.Revision, rec.Group.GroupEpoch, rev)
	}
	g.GroupEpoch = 43
	mustSaveGroup(t, s, g, rev)
}
