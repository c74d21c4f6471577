package persistence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Data directory hygiene: private permissions, a pid file naming the
// process that holds the directory, and refusing a directory that visibly
// lost the file that makes the rest of it readable.

// pidFileName is the file beside Pebble's LOCK that names the holder.
const pidFileName = "rscoord.pid"

const (
	dirMode  os.FileMode = 0o700
	fileMode os.FileMode = 0o600
)

// prepareDir creates dir (0700), tightens an existing one and its files to
// 0700 and 0600 (the audit log holds client addresses), and refuses a
// directory whose tables or logs survive without the manifest marker: Pebble
// would take it for a new database and silently start empty.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var data []string
	marker := false
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(dir, name), fileMode); err != nil {
				return err
			}
		}
		switch {
		case strings.HasPrefix(name, "marker.manifest."):
			marker = true
		case strings.HasSuffix(name, ".sst"), strings.HasSuffix(name, ".log"), strings.HasPrefix(name, "MANIFEST-"):
			data = append(data, name)
		}
	}
	if len(data) > 0 && !marker {
		return newErr(ErrCorrupt, "the data directory holds %d table, log and manifest files (%s) but no manifest marker, "+
			"so what was acknowledged cannot be read back; restore it from a backup or move it aside to start empty",
			len(data), strings.Join(data[:min(len(data), 5)], ", "))
	}
	return nil
}

// privateFS creates every directory 0700 and every file 0600, whatever the
// umask.
type privateFS struct{ vfs.FS }

func (fs privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return f, errors.Join(err, private(name, err))
}

func (fs privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return f, errors.Join(err, private(name, err))
}

func (fs privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return f, errors.Join(err, private(newname, err))
}

func (fs privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return fs.FS.MkdirAll(dir, dirMode)
}

func (fs privateFS) Lock(name string) (io.Closer, error) {
	c, err := fs.FS.Lock(name)
	return c, errors.Join(err, private(name, err))
}

func (fs privateFS) Unwrap() vfs.FS { return fs.FS }

// private makes the file name 0600 after it was created without error.
func private(name string, created error) error {
	if created != nil {
		return nil
	}
	if err := os.Chmod(name, fileMode); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func writePIDFile(dir string) error {
	path := filepath.Join(dir, pidFileName)
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), fileMode); err != nil {
		return err
	}
	return os.Chmod(path, fileMode)
}

func removePIDFile(dir string) error {
	err := os.Remove(filepath.Join(dir, pidFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// pidFileHolder says which process holds dir, from its pid file.
func pidFileHolder(dir string) string {
	path := filepath.Join(dir, pidFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("another process (its pid file %s cannot be read: %v)", path, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Sprintf("another process (its pid file %s holds %q)", path, strings.TrimSpace(string(b)))
	}
	if pid == os.Getpid() {
		return fmt.Sprintf("this process (pid %d, from %s)", pid, path)
	}
	return fmt.Sprintf("process %d (from %s)", pid, path)
}

// isLockError reports whether err is Pebble failing to take its lock file.
func isLockError(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// floorFileName holds the highest revision a store handed out before it
// last closed cleanly.
const floorFileName = "rscoord.revision"

// floorKey holds the same revision inside the store; it is written, synced,
// as the last write before a clean close.
var floorKey = []byte{'v', sep}

const kindFloor = "floor"

// writeFloor records the highest revision handed out in the store, unless
// the store is closed or failed. It returns that revision.
func (c *core) writeFloor() (uint64, error) {
	exit, err := c.enter(context.Background())
	if err != nil {
		return 0, err
	}
	defer exit()
	defer c.recoverFatal(&err)
	rev := c.revision.Load()
	if rev == 0 {
		return 0, nil
	}
	if err := c.commit(context.Background(), putOp(floorKey, frame(kindFloor, rev, []byte("{}")))); err != nil {
		return 0, c.fail(err)
	}
	return rev, nil
}

func writeFloorFile(dir string, rev uint64) error {
	path := filepath.Join(dir, floorFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(rev, 10)+"\n"), fileMode); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	err = errors.Join(f.Sync(), f.Close())
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// checkFloor refuses a store whose highest stored revision is below the
// one it held at its last clean close: acknowledged writes went missing
// (a damaged write-ahead log, which Pebble may read up to the damage and
// take for a clean end).
// It returns the floor it read.
func checkFloor(dir string, recovered uint64) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, floorFileName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	floor, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, newErr(ErrCorrupt, "%s holds %q", floorFileName, strings.TrimSpace(string(b)))
	}
	if recovered < floor {
		return floor, newErr(ErrCorrupt, "the store reads back revisions up to %d, but it held revision %d when it was last closed: "+
			"acknowledged writes are missing (a damaged write-ahead log or table); restore the directory from a backup", recovered, floor)
	}
	return floor, nil
}

// probeDisk writes and syncs a small file in dir through fs and removes it:
// whether the disk takes writes again.
func probeDisk(fs vfs.FS, dir string) error {
	path := fs.PathJoin(dir, "rscoord.probe")
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, 4096))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close(), fs.Remove(path))
}
