package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/rscoord/rscoord/protocol"
)

// Key layout. Every key starts with a one-byte key space and a separator:
//
//	"l\x00"                          layout marker (key layout version)
//	"s\x00" + prefix                 stream record
//	"g\x00" + prefix + "\x00" + name group snapshot
//	"a\x00" + seq (8 bytes, big-endian) audit entry
//
// The separator 0x00 cannot occur in a name (protocol §1 allows only
// [A-Za-z0-9._:@-], checked by [validStreamPrefix] and [validGroupName]
// before any key is built), so the groups of "orders" are exactly the keys in
// ["g\x00orders\x00", "g\x00orders\x01") and never include those of "orders2",
// whose keys continue with '2' after "orders" instead of 0x00.
const sep = 0x00

var (
	layoutKey   = []byte{'l', sep}
	streamSpace = []byte{'s', sep}
	groupSpace  = []byte{'g', sep}
	auditSpace  = []byte{'a', sep}
)

// auditKey is the key of the audit entry with sequence seq. Big-endian
// sequences sort in key order, oldest first.
func auditKey(seq uint64) []byte {
	k := make([]byte, len(auditSpace), len(auditSpace)+8)
	copy(k, auditSpace)
	return binary.BigEndian.AppendUint64(k, seq)
}

// auditBounds is the key range [lower, upper) of all audit entries.
func auditBounds() (lower, upper []byte) {
	lower = bytes.Clone(auditSpace)
	upper = bytes.Clone(auditSpace)
	upper[len(upper)-1] = sep + 1
	return lower, upper
}

// parseAuditKey returns the sequence of a key of the audit space.
func parseAuditKey(k []byte) (seq uint64, ok bool) {
	rest, ok := bytes.CutPrefix(k, auditSpace)
	if !ok || len(rest) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(rest), true
}

func streamKey(prefix string) []byte {
	k := make([]byte, 0, len(streamSpace)+len(prefix))
	return append(append(k, streamSpace...), prefix...)
}

func groupKey(prefix, name string) []byte {
	k := make([]byte, 0, len(groupSpace)+len(prefix)+1+len(name))
	k = append(append(k, groupSpace...), prefix...)
	return append(append(k, sep), name...)
}

// groupBounds is the key range [lower, upper) of the groups of prefix.
func groupBounds(prefix string) (lower, upper []byte) {
	lower = groupKey(prefix, "")
	upper = bytes.Clone(lower)
	upper[len(upper)-1] = sep + 1
	return lower, upper
}

// streamBounds is the key range [lower, upper) of all stream records.
func streamBounds() (lower, upper []byte) {
	lower = bytes.Clone(streamSpace)
	upper = bytes.Clone(streamSpace)
	upper[len(upper)-1] = sep + 1
	return lower, upper
}

// allGroupBounds is the key range [lower, upper) of all group snapshots.
func allGroupBounds() (lower, upper []byte) {
	lower = bytes.Clone(groupSpace)
	upper = bytes.Clone(groupSpace)
	upper[len(upper)-1] = sep + 1
	return lower, upper
}

// parseGroupKey splits a key of the group space; ok is false for any other key.
func parseGroupKey(k []byte) (prefix, name string, ok bool) {
	rest, ok := bytes.CutPrefix(k, groupSpace)
	if !ok {
		return "", "", false
	}
	p, n, ok := bytes.Cut(rest, []byte{sep})
	if !ok {
		return "", "", false
	}
	return string(p), string(n), true
}

// parseStreamKey returns the prefix of a key of the stream space.
func parseStreamKey(k []byte) (prefix string, ok bool) {
	rest, ok := bytes.CutPrefix(k, streamSpace)
	return string(rest), ok
}

func validStreamPrefix(p string) error {
	if err := protocol.ValidateStreamPrefix(p); err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	return nil
}

func validGroupName(prefix, name string) error {
	if err := validStreamPrefix(prefix); err != nil {
		return err
	}
	if err := protocol.ValidateConsumerGroup(name); err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	return nil
}
