package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/rscoord/rscoord/client/protocol"
)

// Key layout 2. Every key starts with a one-byte key space and a separator:
//
//	"l\x00"                             layout marker (key layout version)
//	"s\x00" + prefix                    stream record
//	"g\x00" + prefix + "\x00" + name    group record (group-level state) or
//	                                    the group's tombstone
//	  … + "\x00m\x00" + member id        one member, with its target
//	  … + "\x00o\x00" + chunk (4 bytes)  owner epochs of shards
//	                                    [chunk·ownerChunk, (chunk+1)·ownerChunk)
//	"x\x00" + prefix + "\x00" + name + "\x00" + revision (8) + part (4)
//	                                    one part of a staged group write
//	"a\x00" + seq (8 bytes, big-endian) audit entry
//	"t\x00" + name                      API token (apitokens.go)
//
// Numbers in keys are big-endian so that they sort in key order. A group's
// record sorts right before its members and owner-epoch chunks (the name is
// followed by the end of the key, then by 0x00), so the group and all its
// parts are the one key range of groupPartBounds.
//
// Layout 1 (schema version 1) kept each group as one record under its group
// key and had no other group keys; [core.migrate] rewrites it at open.
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
	stageSpace  = []byte{'x', sep}
)

// Part tags after a group key.
const (
	partMember = 'm'
	partOwners = 'o'
)

// ownerChunk is the number of shards whose owner epochs share one key: a
// grant rewrites one small value, and 100,000 shards take 1,563 keys.
const ownerChunk = 64

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

// parseGroupKey splits a group key (not a part key); ok is false for any
// other key.
func parseGroupKey(k []byte) (prefix, name string, ok bool) {
	prefix, name, part, ok := parseGroupSpaceKey(k)
	if !ok || part != nil {
		return "", "", false
	}
	return prefix, name, true
}

// parseGroupSpaceKey splits any key of the group space: part is nil for the
// group key itself, else what follows the name's separator (tag, 0x00, id).
func parseGroupSpaceKey(k []byte) (prefix, name string, part []byte, ok bool) {
	rest, ok := bytes.CutPrefix(k, groupSpace)
	if !ok {
		return "", "", nil, false
	}
	p, rest, ok := bytes.Cut(rest, []byte{sep})
	if !ok {
		return "", "", nil, false
	}
	n, part, hasPart := bytes.Cut(rest, []byte{sep})
	if hasPart && part == nil {
		part = []byte{}
	}
	return string(p), string(n), part, true
}

// memberKey is the key of member id of group prefix/name.
func memberKey(prefix, name, id string) []byte {
	k := groupKey(prefix, name)
	k = append(k, sep, partMember, sep)
	return append(k, id...)
}

// ownersKey is the key of owner-epoch chunk c of group prefix/name.
func ownersKey(prefix, name string, c uint32) []byte {
	k := groupKey(prefix, name)
	k = append(k, sep, partOwners, sep)
	return binary.BigEndian.AppendUint32(k, c)
}

// parsePart splits a part (see parseGroupSpaceKey) into its tag and rest.
func parsePart(part []byte) (tag byte, rest []byte, ok bool) {
	if len(part) < 2 || part[1] != sep {
		return 0, nil, false
	}
	return part[0], part[2:], true
}

// groupPartBounds is the key range [lower, upper) of the group key of
// prefix/name and all its parts.
func groupPartBounds(prefix, name string) (lower, upper []byte) {
	lower = groupKey(prefix, name)
	upper = append(bytes.Clone(lower), sep+1)
	return lower, upper
}

// subPartBounds is the key range of the parts of prefix/name (without the
// group key).
func subPartBounds(prefix, name string) (lower, upper []byte) {
	lower = append(groupKey(prefix, name), sep)
	upper = append(groupKey(prefix, name), sep+1)
	return lower, upper
}

// stageGroupPrefix is the start of every staged-write key of prefix/name.
func stageGroupPrefix(prefix, name string) []byte {
	k := make([]byte, 0, len(stageSpace)+len(prefix)+len(name)+14)
	k = append(append(k, stageSpace...), prefix...)
	k = append(append(k, sep), name...)
	return append(k, sep)
}

// stageKey is the key of part i of the staged write of prefix/name at rev.
func stageKey(prefix, name string, rev uint64, i uint32) []byte {
	k := stageGroupPrefix(prefix, name)
	k = binary.BigEndian.AppendUint64(k, rev)
	return binary.BigEndian.AppendUint32(k, i)
}

// stageBounds is the key range of the staged writes of prefix/name, or of
// every group of prefix when name is "".
func stageBounds(prefix, name string) (lower, upper []byte) {
	if name == "" {
		lower = append(append(bytes.Clone(stageSpace), prefix...), sep)
	} else {
		lower = stageGroupPrefix(prefix, name)
	}
	upper = bytes.Clone(lower)
	upper[len(upper)-1] = sep + 1
	return lower, upper
}

// allStageBounds is the key range of every staged write.
func allStageBounds() (lower, upper []byte) {
	lower = bytes.Clone(stageSpace)
	upper = bytes.Clone(stageSpace)
	upper[len(upper)-1] = sep + 1
	return lower, upper
}

// parseStageKey splits a key of the stage space.
func parseStageKey(k []byte) (prefix, name string, rev uint64, ok bool) {
	rest, ok := bytes.CutPrefix(k, stageSpace)
	if !ok {
		return "", "", 0, false
	}
	p, rest, ok := bytes.Cut(rest, []byte{sep})
	if !ok {
		return "", "", 0, false
	}
	n, rest, ok := bytes.Cut(rest, []byte{sep})
	if !ok || len(rest) != 12 {
		return "", "", 0, false
	}
	return string(p), string(n), binary.BigEndian.Uint64(rest), true
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
