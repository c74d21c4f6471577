package persistence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rscoord/rscoord/client/protocol"
)

// An open that finds damaged write-ahead logs (see walcheck.go) refuses
// unless Options.AcceptWALLoss is set. With it the store opens as of the
// last record before the damage, and it reports itself degraded
// ([Store.Health]) until an operator restarts it without the option:
//
//  1. the reason goes to walLossFileName, synced, before any log changes,
//     so that a crash from here on still opens degraded;
//  2. the damaged log and every later one are copied to a wal-loss-<time>
//     directory beside them; the damaged log is cut at the end of its last
//     readable record and the later ones are removed, so that Pebble
//     replays up to that record, and nothing from after it;
//  3. Pebble opens; the store logs an ERROR and appends an audit entry.
//
// Every later open with the option keeps the store degraded. The first
// clean open without it removes walLossFileName, and health is UP again.

// walLossFileName holds why the store opened without acknowledged writes.
const walLossFileName = "rscoord.wal-loss"

// keepWALTail carries out steps 1 and 2 above and returns the directory
// that holds the copies ("" when the logs were missing: nothing to keep).
func keepWALTail(fs vfs.FS, dir string, d *walDamage, now time.Time) (kept string, err error) {
	if err := writeSynced(filepath.Join(dir, walLossFileName), d.String()); err != nil {
		return "", err
	}
	if d.path == "" {
		return "", nil
	}
	kept = fs.PathJoin(dir, "wal-loss-"+now.UTC().Format("20060102T150405Z"))
	if err := fs.MkdirAll(kept, dirMode); err != nil {
		return "", err
	}
	for _, p := range append([]string{d.path}, d.later...) {
		if err := copyFile(fs, p, fs.PathJoin(kept, fs.PathBase(p)), -1); err != nil {
			return "", err
		}
	}
	cut := fs.PathJoin(kept, "cut.tmp")
	if err := copyFile(fs, d.path, cut, d.offset); err != nil {
		return "", err
	}
	if err := fs.Rename(cut, d.path); err != nil {
		return "", err
	}
	for _, p := range d.later {
		if err := fs.Remove(p); err != nil {
			return "", err
		}
	}
	return kept, syncDir(fs, dir)
}

// copyFile copies the first n bytes of src (all when n < 0) to a new file
// dst and syncs it.
func copyFile(fs vfs.FS, src, dst string, n int64) (err error) {
	in, err := fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fs.Create(dst, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	var r io.Reader = in
	if n >= 0 {
		r = io.LimitReader(in, n)
	}
	if _, err := io.Copy(out, r); err != nil {
		return err
	}
	return out.Sync()
}

// mkdirSynced creates dir and its missing parents and syncs every parent,
// so that a crash does not lose the directory (as Pebble's open would
// when it creates the directory itself).
func mkdirSynced(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	for p := dir; fs.PathDir(p) != p; p = fs.PathDir(p) {
		if err := syncDir(fs, fs.PathDir(p)); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// writeSynced writes text to path, synced, through a renamed temporary file.
func writeSynced(path, text string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text+"\n"), fileMode); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// openedAfterLoss finishes an open with Options.AcceptWALLoss that found
// damage (step 3): it logs, audits and marks the store degraded.
func (c *core) openedAfterLoss(d *walDamage, kept string, now time.Time) {
	reason := "opened without acknowledged writes (--accept-wal-loss): " + d.String()
	if kept != "" {
		reason += "; the logs as found are kept in " + kept
	}
	c.log.Error("the store lost acknowledged writes and opened without them because --accept-wal-loss is set; "+
		"health stays DEGRADED until a restart without the option",
		slog.String("damage", d.String()), slog.String("kept", kept))
	c.walLoss = reason
	_, err := c.AppendAudit(context.Background(), protocol.AuditEntry{
		Time: now, Operation: protocol.AuditAcceptWALLoss,
		Principal: "rscoord", AuthMethod: "none", RequestedBy: "--accept-wal-loss", Reason: reason,
		Result: protocol.AuditResult{Outcome: "ACCEPTED"},
	})
	if err != nil {
		c.log.Error("the audit entry of the accepted write-ahead log loss was not written", slog.Any("error", err))
	}
}

// reportEarlierLoss runs at a clean open: a loss accepted earlier keeps the
// store degraded while the option is still set, and is cleared without it.
func (c *core) reportEarlierLoss(dir string, accept bool) error {
	path := filepath.Join(dir, walLossFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	earlier := strings.TrimSpace(string(b))
	if accept {
		c.walLoss = fmt.Sprintf("opened earlier without acknowledged writes (--accept-wal-loss): %s; "+
			"restart without --accept-wal-loss to clear this", earlier)
		c.log.Warn("a write-ahead log loss accepted earlier keeps the store DEGRADED while --accept-wal-loss is set",
			slog.String("damage", earlier))
		return nil
	}
	c.log.Info("the write-ahead log loss accepted earlier is cleared: the store opened cleanly without --accept-wal-loss",
		slog.String("damage", earlier))
	return os.Remove(path)
}

// Health implements [Store.Health].
func (c *core) Health() (degraded bool, reason string) {
	var reasons []string
	if c.walLoss != "" {
		reasons = append(reasons, c.walLoss)
	}
	if r := c.auditDamage.Load(); r != nil {
		reasons = append(reasons, *r)
	}
	return len(reasons) > 0, strings.Join(reasons, "; ")
}

// noteAuditDamage makes the store degraded after reading an audit entry
// that does not decode, for the rest of its life: the entry stays as it is
// (this package neither repairs nor deletes damaged records).
func (c *core) noteAuditDamage(err error) {
	reason := "the audit log is damaged: " + err.Error()
	if c.auditDamage.CompareAndSwap(nil, &reason) && c.log != nil {
		c.log.Error("an audit entry does not decode; health is DEGRADED", slog.Any("error", err))
	}
}
