// Package disktest gives tests real file systems that fail: a small tmpfs
// to fill (ENOSPC) and an ext4 file system on a loop device that the kernel
// turns read-only under open files (EROFS), as it does after an I/O error
// on a disk mounted errors=remount-ro. Both need root (mount, losetup);
// where the kernel refuses, the test is skipped with the reason, so a test
// that uses this package must not be the only test of what it checks.
package disktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory and returns it;
// it is unmounted at the end of the test.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("disktest: cannot mount a tmpfs (needs root and a kernel that allows it here): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { unmount(t, dir) })
	return dir
}

// Fill writes a file in dir until the file system is full, leaving slack
// bytes free, and returns a func that removes the file.
func Fill(t testing.TB, dir string, slack int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "disktest.filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("disktest: %v", err)
	}
	buf := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatalf("disktest: fill %s: %v", dir, err)
		}
	}
	if slack > 0 {
		if err := f.Truncate(max(n-slack, 0)); err != nil {
			t.Fatalf("disktest: %v", err)
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("disktest: %v", err)
	}
	return func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("disktest: %v", err)
		}
	}
}

// Ext4 is an ext4 file system on a loop device, mounted errors=remount-ro.
type Ext4 struct {
	t     testing.TB
	size  int64
	image string
	dev   string
	// backing is the tmpfs that holds the image, if it is a small one.
	backing string
	// Dir is where it is mounted.
	Dir string
}

// NewExt4 makes and mounts an ext4 file system of size bytes; it is
// unmounted and its loop device released at the end of the test. With
// room > 0 the image is a sparse file on a tmpfs of room bytes: once the
// file system has written more than that, the device fails its writes
// and ext4 returns EIO (writes, fsync), then aborts its journal and turns
// read-only, as on a disk that fails.
func NewExt4(t testing.TB, size, room int64) *Ext4 {
	t.Helper()
	for _, tool := range []string{"losetup", "mkfs.ext4", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("disktest: %s not installed", tool)
		}
	}
	work := t.TempDir()
	e := &Ext4{t: t, size: size, image: filepath.Join(work, "ext4.img"), Dir: filepath.Join(work, "mnt")}
	if room > 0 {
		e.backing = Tmpfs(t, room)
		e.image = filepath.Join(e.backing, "ext4.img")
	}
	if err := os.Mkdir(e.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.image, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(e.image, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", e.image).CombinedOutput(); err != nil {
		t.Fatalf("disktest: mkfs.ext4: %v: %s", err, out)
	}
	out, err := exec.Command("losetup", "-f", "--show", e.image).CombinedOutput()
	if err != nil {
		t.Skipf("disktest: cannot attach a loop device (needs root and /dev/loop*): %v: %s", err, strings.TrimSpace(string(out)))
	}
	e.dev = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		unmount(t, e.Dir)
		if out, err := exec.Command("losetup", "-d", e.dev).CombinedOutput(); err != nil {
			t.Errorf("disktest: losetup -d %s: %v: %s", e.dev, err, out)
		}
	})
	if err := e.mount(); err != nil {
		t.Skipf("disktest: cannot mount ext4 from %s: %v", e.dev, err)
	}
	return e
}

func (e *Ext4) mount() error {
	if out, err := exec.Command("mount", "-t", "ext4", "-o", "errors=remount-ro", e.dev, e.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// BreakReadOnly makes the kernel report a file-system error, after which
// (errors=remount-ro) it aborts the journal and makes the file system
// read-only: every later write and fsync fails with EROFS, also of files
// already open.
func (e *Ext4) BreakReadOnly() {
	e.t.Helper()
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(e.dev), "trigger_fs_error")
	if err := os.WriteFile(trigger, []byte("disktest\n"), 0o200); err != nil {
		e.t.Fatalf("disktest: %s: %v", trigger, err)
	}
	probe := filepath.Join(e.Dir, "disktest.probe")
	if err := os.WriteFile(probe, nil, 0o600); !errors.Is(err, syscall.EROFS) {
		e.t.Fatalf("disktest: %s is not read-only after the error: %v", e.Dir, err)
	}
}

// Repair is what an operator does after the disk is fixed (or replaced by
// a larger one): unmount, check the file system and mount it again,
// writable. Every process using it must have exited.
func (e *Ext4) Repair() {
	e.t.Helper()
	if out, err := exec.Command("umount", e.Dir).CombinedOutput(); err != nil {
		e.t.Fatalf("disktest: umount %s: %v: %s", e.Dir, err, out)
	}
	if e.backing != "" {
		if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%d", 2*e.size), e.backing).CombinedOutput(); err != nil {
			e.t.Fatalf("disktest: grow the device under %s: %v: %s", e.Dir, err, out)
		}
	}
	// e2fsck exits 1 when it fixed something: the error just triggered.
	if out, err := exec.Command("e2fsck", "-f", "-y", e.dev).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() > 1 {
			e.t.Fatalf("disktest: e2fsck %s: %v: %s", e.dev, err, out)
		}
	}
	if err := e.mount(); err != nil {
		e.t.Fatalf("disktest: mount again: %v", err)
	}
}

// unmount unmounts dir if it is still mounted.
func unmount(t testing.TB, dir string) {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err == nil && !strings.Contains(string(mounts), " "+dir+" ") {
		return
	}
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Logf("disktest: umount %s: %v: %s; unmounting lazily", dir, err, out)
		_ = exec.Command("umount", "-l", dir).Run()
	}
}
