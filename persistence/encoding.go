package persistence

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// On-disk format of every value:
//
//	value    = crc32c(body) as 4 bytes little-endian ‖ body
//	body     = {"schemaVersion":1,"kind":"group","storeRevision":7,"payload":{…}}
//
// kind is "stream", "group", "audit" or "layout" and must match the key space;
// storeRevision is the record's revision (never 0); payload is the JSON
// record of that schema version and kind (groupV1, streamV1, layoutV1),
// which also repeats the record's identity (prefix, name) so that a value
// under the wrong key is detected.
//
// The checksum (CRC-32C, Castagnoli) covers the whole body, envelope
// included, so any flipped byte, also one in storeRevision or schemaVersion,
// is detected as [ErrCorrupt]; CRC-32 detects every error burst up to 32 bits.
// The frame (checksum, then a JSON object with schemaVersion) is the part of
// the format every schema version must keep, so that old code can tell
// "newer than me" ([ErrUnknownSchema]) from "damaged" ([ErrCorrupt]).
//
// Payloads are the explicit record types below, decoupled from assign and
// protocol types so that a change there cannot silently change what is on
// disk. Decoding is strict (unknown fields are refused): any change to a
// payload bumps [SchemaVersion] and keeps a decoder for the older versions.

// SchemaVersion is the schema version this build writes. It reads version
// 1 as well: stream, audit and layout payloads are the same in both, and a
// version-1 group record (the whole group in one value, key layout 1) is
// decoded as such and rewritten in the per-key layout at open (see
// [core.migrate]).
const SchemaVersion = 2

// oldestSchemaVersion is the oldest schema version this build reads.
const oldestSchemaVersion = 1

// Record kinds in the envelope. A value of the wrong kind under a key is
// corrupt.
const (
	kindStream    = "stream"
	kindGroup     = "group"
	kindTombstone = "tombstone"
	kindMember    = "member"
	kindOwners    = "owners"
	kindStage     = "stage"
	kindLayout    = "layout"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const checksumLen = 4

type envelope struct {
	SchemaVersion int             `json:"schemaVersion"`
	Kind          string          `json:"kind"`
	StoreRevision uint64          `json:"storeRevision"`
	Payload       json.RawMessage `json:"payload"`
}

// frame wraps payload, an encoded record, into a checksummed envelope.
func frame(kind string, revision uint64, payload []byte) []byte {
	return frameVersion(SchemaVersion, kind, revision, payload)
}

func frameVersion(schema int, kind string, revision uint64, payload []byte) []byte {
	// Built by hand rather than with json.Marshal, which would re-validate
	// and compact the payload on every write.
	body := make([]byte, 0, len(payload)+80)
	body = append(body, `{"schemaVersion":`...)
	body = strconv.AppendInt(body, int64(schema), 10)
	body = append(body, `,"kind":`...)
	body = strconv.AppendQuote(body, kind)
	body = append(body, `,"storeRevision":`...)
	body = strconv.AppendUint(body, revision, 10)
	body = append(body, `,"payload":`...)
	body = append(body, payload...)
	body = append(body, '}')
	return frameBody(body)
}

// frameBody prepends the checksum of body.
func frameBody(body []byte) []byte {
	v := make([]byte, checksumLen, checksumLen+len(body))
	binary.LittleEndian.PutUint32(v, crc32.Checksum(body, castagnoli))
	return append(v, body...)
}

// unframe checks the checksum and schema version of value and returns its
// envelope, which must be of kind. Errors wrap ErrCorrupt or
// ErrUnknownSchema.
func unframe(value []byte, kind string) (envelope, error) {
	return unframeOf(value, kind)
}

// unframeOf is unframe for a key that may hold a record of any of kinds.
func unframeOf(value []byte, kinds ...string) (envelope, error) {
	if len(value) < checksumLen {
		return envelope{}, newErr(ErrCorrupt, "value is %d bytes long, shorter than its checksum", len(value))
	}
	body := value[checksumLen:]
	if stored, computed := binary.LittleEndian.Uint32(value), crc32.Checksum(body, castagnoli); stored != computed {
		return envelope{}, newErr(ErrCorrupt, "checksum mismatch (stored %08x, computed %08x)", stored, computed)
	}
	// The checksum holds, so the writer meant these bytes.
	env, ok := parseFrame(body)
	if !ok {
		// Read the schema version alone first: a newer schema may have a
		// different envelope, which a strict decode would misreport as
		// corrupt.
		var version struct {
			SchemaVersion int `json:"schemaVersion"`
		}
		if err := json.Unmarshal(body, &version); err != nil {
			return envelope{}, newErr(ErrCorrupt, "envelope: %v", err)
		}
		env.SchemaVersion = version.SchemaVersion
	}
	if env.SchemaVersion < oldestSchemaVersion || env.SchemaVersion > SchemaVersion {
		return envelope{}, newErr(ErrUnknownSchema, "schemaVersion %d, this build reads only %d to %d",
			env.SchemaVersion, oldestSchemaVersion, SchemaVersion)
	}
	if !ok {
		if err := strictUnmarshal(body, &env); err != nil {
			return envelope{}, newErr(ErrCorrupt, "envelope: %v", err)
		}
	}
	switch {
	case !slices.Contains(kinds, env.Kind):
		return envelope{}, newErr(ErrCorrupt, "record of kind %q where %q belongs", env.Kind, strings.Join(kinds, " or "))
	case env.StoreRevision == 0:
		return envelope{}, newErr(ErrCorrupt, "storeRevision 0")
	}
	return env, nil
}

// parseFrame reads an envelope in the exact shape frameVersion writes (and
// json.Marshal of envelope wrote under schema 1): the four fields in that
// order, without spaces, a kind of lower-case letters, decimal numbers. It
// reports false for anything else, which the general decoder then reads.
//
// It leaves the payload to its own decoder, which is strict: every load
// decodes the payload it uses, so a payload that is not one JSON value is
// still refused as corrupt, while a store opens and loads without
// scanning every value three times (once for the schema version, once to
// validate the envelope, once to decode it). A restart reads every value
// of the store twice (revision recovery, then the load), so this is most
// of what a restart costs.
func parseFrame(body []byte) (env envelope, ok bool) {
	rest, ok := bytes.CutPrefix(body, []byte(`{"schemaVersion":`))
	if !ok {
		return env, false
	}
	schema, rest, ok := cutDigits(rest)
	if !ok || schema > 1<<20 {
		return env, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"kind":"`)); !ok {
		return env, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return env, false
	}
	for _, c := range rest[:end] {
		if c < 'a' || c > 'z' {
			return env, false
		}
	}
	kind := rest[:end]
	if rest, ok = bytes.CutPrefix(rest[end+1:], []byte(`,"storeRevision":`)); !ok {
		return env, false
	}
	revision, rest, ok := cutDigits(rest)
	if !ok {
		return env, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"payload":`)); !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return env, false
	}
	return envelope{SchemaVersion: int(schema), Kind: string(kind), StoreRevision: revision, Payload: rest[:len(rest)-1]}, true
}

// cutDigits parses the decimal number b starts with (no sign, no leading
// zero unless it is 0) and returns the rest.
func cutDigits(b []byte) (uint64, []byte, bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && b[0] == '0') {
		return 0, b, false
	}
	v, err := strconv.ParseUint(string(b[:n]), 10, 64)
	if err != nil {
		return 0, b, false
	}
	return v, b[n:], true
}

// strictUnmarshal decodes exactly one JSON value into v, refusing unknown
// fields and trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Payload record types of schema version 1. Stream, migration and layout
// payloads are unchanged in version 2; groupV1 and memberV1 are read only,
// to migrate.

type groupV1 struct {
	StreamPrefix    string           `json:"streamPrefix"`
	Name            string           `json:"name"`
	State           string           `json:"state"`
	GroupEpoch      int64            `json:"groupEpoch"`
	AssignmentEpoch int64            `json:"assignmentEpoch"`
	MetadataVersion int64            `json:"metadataVersion"`
	ShardCount      int              `json:"shardCount"`
	DrainingShards  []int            `json:"drainingShards"`
	Members         []memberV1       `json:"members"` // sorted by id
	Target          map[string][]int `json:"target"`
	CorrectionOpen  bool             `json:"correctionOpen"`
	ActiveMigration *migrationV1     `json:"activeMigration,omitempty"`
	CreatedAt       time.Time        `json:"createdAt,omitzero"`
}

type memberV1 struct {
	ID                   string    `json:"id"`
	Name                 string    `json:"name"`
	State                string    `json:"state"`
	Epoch                int64     `json:"epoch"`
	PreviousEpoch        int64     `json:"previousEpoch"`
	MetadataVersion      int64     `json:"metadataVersion"`
	MaxConcurrency       int       `json:"maxConcurrency"`
	AvailableConcurrency int       `json:"availableConcurrency"`
	Current              []int     `json:"current"`
	Revoking             []int     `json:"revoking"`
	Granted              []int     `json:"granted"`
	Reported             bool      `json:"reported"`
	JoinedAt             time.Time `json:"joinedAt,omitzero"`
	RebalanceDeadline    time.Time `json:"rebalanceDeadline,omitzero"`
	StateChangedAt       time.Time `json:"stateChangedAt,omitzero"`
}

type migrationV1 struct {
	ReshardingID   string    `json:"reshardingId"`
	FromShardCount int       `json:"fromShardCount"`
	ToShardCount   int       `json:"toShardCount"`
	State          string    `json:"state"`
	CreatedAt      time.Time `json:"createdAt,omitzero"`
	UpdatedAt      time.Time `json:"updatedAt,omitzero"`
}

type streamV1 struct {
	StreamPrefix    string              `json:"streamPrefix"`
	ShardCount      int                 `json:"shardCount"`
	DrainingShards  []int               `json:"drainingShards"`
	MetadataVersion int64               `json:"metadataVersion"`
	Migrations      []migrationRecordV1 `json:"migrations"` // oldest first
	CreatedAt       time.Time           `json:"createdAt,omitzero"`
	// Autoscale is optional; records written before it existed lack it.
	Autoscale *autoscaleV1 `json:"autoscale,omitempty"`
}

type migrationRecordV1 struct {
	migrationV1
	RequestedBy string    `json:"requestedBy,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	ActivatedAt time.Time `json:"activatedAt,omitzero"`
	// DeprecatedAfter is optional; records written before it existed
	// simply lack it.
	DeprecatedAfter time.Time `json:"deprecatedAfter,omitzero"`
	RetiredShards   []int     `json:"retiredShards"`
	Note            string    `json:"note,omitempty"`
}

type layoutV1 struct {
	// KeyLayout is the version of the key layout (keys.go).
	KeyLayout int `json:"keyLayout"`
}

// keyLayout is the version of the key layout in keys.go. A store of layout
// 1 is migrated at open; one of a newer layout is refused.
const keyLayout = 2

// decodeGroupV1 decodes the schema-1 payload of the snapshot stored under the key of
// prefix/name. Errors wrap ErrCorrupt.
//
// The checksum proved these are the bytes a writer meant, not that the
// writer was right, and the rest of the coordinator relies on the invariants
// of [assign.Group] without checking them. So decoding cleans the record at
// this boundary: maps are never nil (assign writes into them), shard sets are
// sorted, de-duplicated and non-nil (assign merges them as sorted sets, and
// monitoring answers [] rather than null), the members map is keyed by each
// member's own id, and times are UTC. What cannot be cleaned without
// guessing (another group's identity, a member without id or twice) is
// corrupt.
func decodeGroupV1(payload []byte, prefix, name string) (*assign.Group, error) {
	var rec groupV1
	if err := strictUnmarshal(payload, &rec); err != nil {
		return nil, newErr(ErrCorrupt, "group payload: %v", err)
	}
	if rec.StreamPrefix != prefix || rec.Name != name {
		return nil, newErr(ErrCorrupt, "snapshot of group %s/%s stored under %s/%s", rec.StreamPrefix, rec.Name, prefix, name)
	}
	g := &assign.Group{
		StreamPrefix:    rec.StreamPrefix,
		Name:            rec.Name,
		State:           protocol.GroupState(rec.State),
		GroupEpoch:      rec.GroupEpoch,
		AssignmentEpoch: rec.AssignmentEpoch,
		MetadataVersion: rec.MetadataVersion,
		ShardCount:      rec.ShardCount,
		DrainingShards:  cleanShards(rec.DrainingShards),
		Members:         make(map[string]*assign.Member, len(rec.Members)),
		Target:          make(map[string][]int, len(rec.Target)),
		CorrectionOpen:  rec.CorrectionOpen,
		CreatedAt:       utc(rec.CreatedAt),
	}
	for _, m := range rec.Members {
		if m.ID == "" {
			return nil, newErr(ErrCorrupt, "member without id")
		}
		if _, dup := g.Members[m.ID]; dup {
			return nil, newErr(ErrCorrupt, "member %q listed twice", m.ID)
		}
		g.Members[m.ID] = &assign.Member{
			ID:                   m.ID,
			Name:                 m.Name,
			State:                protocol.MemberState(m.State),
			Epoch:                m.Epoch,
			PreviousEpoch:        m.PreviousEpoch,
			MetadataVersion:      m.MetadataVersion,
			MaxConcurrency:       m.MaxConcurrency,
			AvailableConcurrency: m.AvailableConcurrency,
			Current:              cleanShards(m.Current),
			Revoking:             cleanShards(m.Revoking),
			Granted:              cleanShards(m.Granted),
			Reported:             m.Reported,
			JoinedAt:             utc(m.JoinedAt),
			RebalanceDeadline:    utc(m.RebalanceDeadline),
			StateChangedAt:       utc(m.StateChangedAt),
		}
	}
	for id, shards := range rec.Target {
		g.Target[id] = cleanShards(shards)
	}
	if m := rec.ActiveMigration; m != nil {
		g.ActiveMigration = &protocol.Migration{
			ReshardingID:   m.ReshardingID,
			FromShardCount: m.FromShardCount,
			ToShardCount:   m.ToShardCount,
			State:          protocol.MigrationState(m.State),
			CreatedAt:      utc(m.CreatedAt),
			UpdatedAt:      utc(m.UpdatedAt),
		}
	}
	return g, nil
}

// encodeStream returns the payload of rec.
func encodeStream(rec StreamRecord) ([]byte, error) {
	if err := validStreamPrefix(rec.StreamPrefix); err != nil {
		return nil, err
	}
	out := streamV1{
		StreamPrefix:    rec.StreamPrefix,
		ShardCount:      rec.ShardCount,
		DrainingShards:  cleanShards(rec.DrainingShards),
		MetadataVersion: rec.MetadataVersion,
		Migrations:      make([]migrationRecordV1, 0, len(rec.Migrations)),
		CreatedAt:       utc(rec.CreatedAt),
		Autoscale:       encodeAutoscale(rec.Autoscale),
	}
	for _, m := range rec.Migrations {
		out.Migrations = append(out.Migrations, migrationRecordV1{
			migrationV1: migrationV1{
				ReshardingID:   m.ReshardingID,
				FromShardCount: m.FromShardCount,
				ToShardCount:   m.ToShardCount,
				State:          string(m.State),
				CreatedAt:      utc(m.CreatedAt),
				UpdatedAt:      utc(m.UpdatedAt),
			},
			RequestedBy:     m.RequestedBy,
			Reason:          m.Reason,
			ActivatedAt:     utc(m.ActivatedAt),
			DeprecatedAfter: utc(m.DeprecatedAfter),
			RetiredShards:   cleanShards(m.RetiredShards),
			Note:            m.Note,
		})
	}
	return json.Marshal(out)
}

// decodeStream decodes the payload of the stream record stored under the key
// of prefix, cleaning it as decodeGroup does (and for the same reasons).
// Errors wrap ErrCorrupt.
func decodeStream(payload []byte, prefix string) (StreamRecord, error) {
	var rec streamV1
	if err := strictUnmarshal(payload, &rec); err != nil {
		return StreamRecord{}, newErr(ErrCorrupt, "stream payload: %v", err)
	}
	if rec.StreamPrefix != prefix {
		return StreamRecord{}, newErr(ErrCorrupt, "record of stream %s stored under %s", rec.StreamPrefix, prefix)
	}
	out := StreamRecord{
		StreamPrefix:    rec.StreamPrefix,
		ShardCount:      rec.ShardCount,
		DrainingShards:  cleanShards(rec.DrainingShards),
		MetadataVersion: rec.MetadataVersion,
		Migrations:      make([]MigrationRecord, 0, len(rec.Migrations)),
		CreatedAt:       utc(rec.CreatedAt),
		Autoscale:       decodeAutoscale(rec.Autoscale),
	}
	for _, m := range rec.Migrations {
		out.Migrations = append(out.Migrations, MigrationRecord{
			Migration: protocol.Migration{
				ReshardingID:   m.ReshardingID,
				FromShardCount: m.FromShardCount,
				ToShardCount:   m.ToShardCount,
				State:          protocol.MigrationState(m.State),
				CreatedAt:      utc(m.CreatedAt),
				UpdatedAt:      utc(m.UpdatedAt),
			},
			RequestedBy:     m.RequestedBy,
			Reason:          m.Reason,
			ActivatedAt:     utc(m.ActivatedAt),
			DeprecatedAfter: utc(m.DeprecatedAfter),
			RetiredShards:   cleanShards(m.RetiredShards),
			Note:            m.Note,
		})
	}
	return out, nil
}

// cleanShards returns a new sorted shard set without duplicates, never nil.
func cleanShards(s []int) []int {
	out := slices.Clone(s)
	if out == nil {
		out = []int{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// utc returns t in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
