package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// Pebble replays its write-ahead logs at open and stops at the first record
// it cannot read. It fails the open when it can prove that acknowledged
// writes follow the damage: a later chunk of the log says it was written
// after a sync that covered the damaged offset. But it looks for such a
// chunk only from the next 32 KiB block on, and only in logs that record
// synced offsets (not the first log of a new database). Damage in the last
// block of the newest log (all of a small log) therefore reads as a torn
// tail, and the open succeeds without every acknowledged write after it.
//
// findWALDamage reads the logs with Pebble's own reader before Pebble
// opens and adds the check Pebble leaves out: after the point where
// reading stopped, a record of the same log (see checkTornTail). A torn
// last record (a write cut by a crash) has no such record after it and is
// not damage. OpenPebble opens a new database twice, so that the log
// acknowledged writes go to records synced offsets.

// walBlockSize is the block size of Pebble's log format.
const walBlockSize = 32 << 10

// walDamage describes write-ahead logs that lost acknowledged writes.
type walDamage struct {
	// path is the damaged log; "" when the logs are missing altogether.
	path string
	// offset is where the readable records of path end; size is its size.
	offset, size int64
	// cause is what is wrong at offset.
	cause string
	// later are the logs after path. Opening without the damaged records
	// drops them too, so that the store shows one earlier moment.
	later []string
	// torn is set instead when path merely ends in a torn record: a write
	// cut by a crash, never acknowledged. Pebble drops it at open.
	torn bool
}

func (d *walDamage) String() string {
	if d.path == "" {
		return "the write-ahead log is missing: the directory holds a database (a manifest and an OPTIONS file) " +
			"but no log file, so every write acknowledged since the last flush is gone"
	}
	s := fmt.Sprintf("write-ahead log %s is damaged at offset %d of %d bytes (%s): the acknowledged writes from there on cannot be read",
		d.path, d.offset, d.size, d.cause)
	if len(d.later) > 0 {
		s += fmt.Sprintf(", nor the %d later logs (%s)", len(d.later), strings.Join(d.later, ", "))
	}
	return s
}

// refusal is the error an open without Options.AcceptWALLoss returns.
func (d *walDamage) refusal() error {
	return newErr(ErrCorrupt, "%s; restore the directory from a backup, or start with --accept-wal-loss "+
		"(persistence.Options.AcceptWALLoss) to open it without those writes", d)
}

// hasDatabase reports whether dir holds a Pebble database (its manifest
// marker).
func hasDatabase(fs vfs.FS, dir string) bool {
	names, err := fs.List(dir)
	if err != nil {
		return false
	}
	for _, name := range names {
		if strings.HasPrefix(name, "marker.manifest.") {
			return true
		}
	}
	return false
}

// findWALDamage checks the write-ahead logs of the Pebble database in dir:
// nil when they are intact, a walDamage with torn set when the newest ends
// in a torn record.
func findWALDamage(fs vfs.FS, dir string) (*walDamage, error) {
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // a new database on a file system of its own (tests)
	}
	if err != nil {
		return nil, err
	}
	var marker, options bool
	for _, name := range names {
		marker = marker || strings.HasPrefix(name, "marker.manifest.")
		options = options || strings.HasPrefix(name, "OPTIONS-")
	}
	if !marker {
		return nil, nil // a new database
	}
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		return nil, err
	}
	if len(logs) == 0 {
		// Pebble keeps the log of its mutable memtable from the end of its
		// first open on (it writes the OPTIONS file after creating it), a
		// clean close included. An open that never got that far leaves no
		// OPTIONS file.
		if options {
			return &walDamage{}, nil
		}
		return nil, nil
	}
	for i, ll := range logs {
		d, err := checkLog(ll, i == len(logs)-1)
		if err != nil || d == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		for _, later := range logs[i+1:] {
			for j := range later.NumSegments() {
				_, path := later.SegmentLocation(j)
				d.later = append(d.later, path)
			}
		}
		return d, nil
	}
	return nil, nil
}

// checkLog reads one log as Pebble's replay does. newest is set for the
// last log, the only one whose end may be torn.
func checkLog(ll wal.LogicalLog, newest bool) (*walDamage, error) {
	r := ll.OpenForRead()
	defer func() { _ = r.Close() }()
	for {
		_, off, err := r.NextRecord()
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return nil, nil
		case errors.Is(err, record.ErrUnexpectedEOF) && newest:
			return checkTornTail(ll, off)
		case errors.Is(err, record.ErrUnexpectedEOF), errors.Is(err, record.ErrInvalidChunk),
			errors.Is(err, record.ErrZeroedChunk), pebble.IsCorruptionError(err):
			return damageAt(ll, off, err.Error())
		default:
			return nil, fmt.Errorf("read write-ahead log %s: %w", ll, err)
		}
	}
}

// checkTornTail decides whether the newest log, unreadable from off on, is
// torn or damaged. It looks at every offset after off for the first chunk
// of a record of this log that Pebble's reader accepts. One whose header
// names a synced offset beyond off proves that off was synced, so the
// writes after it were acknowledged. A chunk without a synced offset (the
// format Pebble writes before its format version is set, in the first log
// of a new database) proves only that the log went on after off; it
// counts as damage too, since a crash ends a log and leaves no record
// after a torn one.
func checkTornTail(ll wal.LogicalLog, off wal.Offset) (*walDamage, error) {
	fs, path := ll.SegmentLocation(ll.NumSegments() - 1)
	if off.PhysicalFile != "" {
		path = off.PhysicalFile
	}
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rest, err := io.ReadAll(io.NewSectionReader(f, off.Physical, maxWALScan))
	if err != nil {
		return nil, err
	}
	for q := 1; q+walRecyclableHeaderSize <= len(rest); q++ {
		// A chunk never crosses a block: b ends where the block does.
		end := min(len(rest), q+walBlockSize-int((off.Physical+int64(q))%walBlockSize))
		synced, hasSynced, ok := recordAt(rest[q:end], uint32(ll.Num))
		switch {
		case !ok:
		case !hasSynced:
			return damageAt(ll, off, fmt.Sprintf("a record of this log follows at offset %d", off.Physical+int64(q)))
		case synced > uint64(off.Physical):
			return damageAt(ll, off, fmt.Sprintf("a record at offset %d was written after a sync up to offset %d",
				off.Physical+int64(q), synced))
		}
	}
	if !tornAt(rest, uint32(ll.Num)) {
		return nil, nil
	}
	d, err := damageAt(ll, off, "a torn last record")
	if d != nil {
		d.torn = true
	}
	return d, err
}

// tornAt reports whether b, where a log's readable records end, starts
// with a torn record rather than the log's clean end: zeros (space Pebble
// set aside) and a chunk of another log (the rest of a recycled file) end
// it cleanly.
func tornAt(b []byte, logNum uint32) bool {
	// Encodings 5 to 12 are the chunk formats with a log number.
	if len(b) >= walRecyclableHeaderSize && b[walEncodingOffset] >= walRecyclableFullChunk && b[walEncodingOffset] <= walSyncLastChunk {
		return binary.LittleEndian.Uint32(b[walLogNumOffset:]) == logNum
	}
	for _, c := range b[:min(len(b), walSyncHeaderSize)] {
		if c != 0 {
			return true
		}
	}
	return false
}

// maxWALScan bounds how much of a log checkTornTail reads; a log holds
// about one memtable (Options.MemTableSize).
const maxWALScan = 1 << 30

// Pebble's log chunk header (record/record.go): checksum (4 bytes), length
// (2), encoding (1), log number (4) and, in the format that has it, the
// synced offset (8).
const (
	walRecyclableHeaderSize = 11
	walSyncHeaderSize       = 19
	walRecyclableFullChunk  = 5
	walRecyclableFirstChunk = 6
	walSyncFullChunk        = 9
	walSyncFirstChunk       = 10
	walSyncLastChunk        = 12
	walEncodingOffset       = 6
	walLogNumOffset         = 7
	walSyncedOffsetStart    = 11
)

// recordAt reports whether b starts with the first chunk of a record of
// log logNum, and the synced offset its header names if it has one. The
// header fields only pick candidates: Pebble's reader checks the chunk
// (its log number, length and checksum).
func recordAt(b []byte, logNum uint32) (synced uint64, hasSynced, ok bool) {
	if len(b) < walRecyclableHeaderSize {
		return 0, false, false
	}
	switch b[walEncodingOffset] {
	case walSyncFullChunk, walSyncFirstChunk:
		if len(b) < walSyncHeaderSize {
			return 0, false, false
		}
		hasSynced = true
	case walRecyclableFullChunk, walRecyclableFirstChunk:
	default:
		return 0, false, false
	}
	if binary.LittleEndian.Uint32(b[walLogNumOffset:]) != logNum {
		return 0, false, false
	}
	if _, err := newLogReader(bytes.NewReader(b), uint64(logNum)).Next(); err != nil {
		return 0, false, false
	}
	if hasSynced {
		synced = binary.LittleEndian.Uint64(b[walSyncedOffsetStart:])
	}
	return synced, hasSynced, true
}

// newLogReader is record.NewReader for log number n. Its parameter type
// lives in a package internal to Pebble, so n is converted to it by
// reflection.
func newLogReader(r io.Reader, n uint64) *record.Reader {
	fn := reflect.ValueOf(record.NewReader)
	out := fn.Call([]reflect.Value{reflect.ValueOf(&r).Elem(), reflect.ValueOf(n).Convert(fn.Type().In(1))})
	return out[0].Interface().(*record.Reader)
}

func damageAt(ll wal.LogicalLog, off wal.Offset, cause string) (*walDamage, error) {
	fs, path := ll.SegmentLocation(ll.NumSegments() - 1)
	if off.PhysicalFile != "" {
		path = off.PhysicalFile
	}
	st, err := fs.Stat(path)
	if err != nil {
		return nil, err
	}
	return &walDamage{path: path, offset: off.Physical, size: st.Size(), cause: cause}, nil
}
