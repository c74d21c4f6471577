package persistence

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// mustPayload is the group record payload of g.
func mustPayload(t *testing.T, g *assign.Group) []byte {
	t.Helper()
	p, err := encodeGroupHead(g)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// roundTrip saves g in a new memory store and loads it back.
func roundTrip(t *testing.T, g *assign.Group) *assign.Group {
	t.Helper()
	s := NewMemory()
	mustSaveGroup(t, s, g, 0)
	return mustLoadGroup(t, s, g.StreamPrefix, g.Name).Group
}

func mustMemberPayload(t *testing.T, g *assign.Group, id string) []byte {
	t.Helper()
	target, ok := g.Target[id]
	p, err := encodeMember(g.Members[id], target, ok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// flip returns a copy of v with bit 0 of byte i inverted.
func flip(v []byte, i int) []byte {
	c := bytes.Clone(v)
	c[i] ^= 0x01
	return c
}

func bytesIndex(t *testing.T, v []byte, s string) int {
	t.Helper()
	i := bytes.Index(v, []byte(s))
	if i < 0 {
		t.Fatalf("%q not found in %s", s, v)
	}
	return i
}

// TestGolden pins the payloads: the encoder must still write exactly these
// bytes (a change needs a new schema version) and the decoder must still
// read them. Run with -rewrite after a deliberate change. The schema-1
// group record is no longer written; it is only decoded.
func TestGolden(t *testing.T) {
	t.Parallel()
	stream, err := encodeStream(richStream("orders"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file    string
		encoded []byte
		decode  func(payload []byte) (any, error)
		want    any
	}{
		{
			file:   "group-v1.json",
			decode: func(p []byte) (any, error) { return decodeGroupV1(p, "orders", "billing") },
			want:   durableV1(richGroup("orders", "billing")),
		},
		{
			file:    "group-v2.json",
			encoded: mustPayload(t, richGroup("orders", "billing")),
		},
		{
			file:    "member-v2.json",
			encoded: mustMemberPayload(t, richGroup("orders", "billing"), "m-active"),
		},
		{
			file:    "stream-v1.json",
			encoded: stream,
			decode:  func(p []byte) (any, error) { return decodeStream(p, "orders") },
			want:    richStream("orders"),
		},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", c.file)
			if *rewrite && c.encoded != nil {
				if err := os.WriteFile(path, append(bytes.Clone(c.encoded), '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			golden = bytes.TrimSuffix(golden, []byte("\n"))
			if c.encoded != nil && !bytes.Equal(c.encoded, golden) {
				t.Errorf("encoding changed; bump SchemaVersion or run with -rewrite\n got: %s\nwant: %s", c.encoded, golden)
			}
			if c.decode == nil {
				return
			}
			got, err := c.decode(golden)
			if err != nil {
				t.Fatal(err)
			}
			assertEqual(t, "decoded golden", got, c.want)
		})
	}
}

func TestEncodingIsDeterministic(t *testing.T) {
	t.Parallel()
	first := mustPayload(t, richGroup("orders", "g"))
	for range 20 { // map iteration order differs between runs
		if again := mustPayload(t, richGroup("orders", "g")); !bytes.Equal(again, first) {
			t.Fatalf("two encodings of one group differ:\n%s\n%s", first, again)
		}
	}
}

// TestEveryBitFlipIsCorrupt: the checksum covers the whole value.
func TestEveryBitFlipIsCorrupt(t *testing.T) {
	t.Parallel()
	v := frame(kindGroup, 1234, mustPayload(t, richGroup("orders", "g")))
	if _, err := unframe(v, kindGroup); err != nil {
		t.Fatalf("intact value: %v", err)
	}
	for i := range v {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(v)
			c[i] ^= mask
			if _, err := unframe(c, kindGroup); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d ^ %#x: %v, want ErrCorrupt", i, mask, err)
			}
		}
	}
}

// TestDecodeCleans: what a checksum cannot vouch for is cleaned on the way in.
func TestDecodeCleans(t *testing.T) {
	t.Parallel()
	payload := `{"streamPrefix":"orders","name":"g","state":"STABLE","groupEpoch":3,"assignmentEpoch":3,
		"metadataVersion":2,"shardCount":4,"drainingShards":null,
		"members":[
			{"id":"b","name":"","state":"ACTIVE","epoch":3,"previousEpoch":2,"metadataVersion":2,
			 "maxConcurrency":1,"availableConcurrency":1,"current":[3,1,1,2],"revoking":null,"granted":[2,2],
			 "reported":true,"joinedAt":"2026-11-29T11:00:00+01:00"},
			{"id":"a","name":"","state":"STARTING","epoch":3,"previousEpoch":0,"metadataVersion":0,
			 "maxConcurrency":1,"availableConcurrency":0,"current":[],"revoking":[],"granted":[],"reported":false}
		],
		"target":{"a":[0],"b":[3,2,1,3],"c":null},"correctionOpen":false}`
	got, err := decodeGroupV1([]byte(payload), "orders", "g")
	if err != nil {
		t.Fatal(err)
	}
	want := &assign.Group{
		StreamPrefix: "orders", Name: "g", State: protocol.GroupStable, GroupEpoch: 3, AssignmentEpoch: 3,
		MetadataVersion: 2, ShardCount: 4, DrainingShards: []int{},
		Members: map[string]*assign.Member{
			"a": {ID: "a", State: protocol.MemberStarting, Epoch: 3, MaxConcurrency: 1,
				Current: []int{}, Revoking: []int{}, Granted: []int{}},
			"b": {ID: "b", State: protocol.MemberActive, Epoch: 3, PreviousEpoch: 2, MetadataVersion: 2,
				MaxConcurrency: 1, AvailableConcurrency: 1, Current: []int{1, 2, 3}, Revoking: []int{},
				Granted: []int{2}, Reported: true, JoinedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
		},
		Target: map[string][]int{"a": {0}, "b": {1, 2, 3}, "c": {}},
	}
	assertEqual(t, "cleaned group", got, want)

	empty, err := decodeGroupV1([]byte(`{"streamPrefix":"orders","name":"g","state":"","groupEpoch":0,
		"assignmentEpoch":0,"metadataVersion":0,"shardCount":0,"drainingShards":null,"members":null,
		"target":null,"correctionOpen":false}`), "orders", "g")
	if err != nil {
		t.Fatal(err)
	}
	if empty.Members == nil || empty.Target == nil || empty.DrainingShards == nil {
		t.Fatalf("nil maps or sets survived decoding: %+v", empty)
	}

	stream, err := decodeStream([]byte(`{"streamPrefix":"s","shardCount":2,"drainingShards":[5,3,5],
		"metadataVersion":1,"migrations":[{"reshardingId":"r","fromShardCount":6,"toShardCount":2,
		"state":"DRAINING","createdAt":"2026-11-29T11:00:00+01:00","retiredShards":[4,2,4]}]}`), "s")
	if err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "cleaned stream", stream, StreamRecord{
		StreamPrefix: "s", ShardCount: 2, DrainingShards: []int{3, 5}, MetadataVersion: 1,
		Migrations: []MigrationRecord{{
			Migration: protocol.Migration{ReshardingID: "r", FromShardCount: 6, ToShardCount: 2,
				State: protocol.MigrationDraining, CreatedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
			RetiredShards: []int{2, 4},
		}},
	})
}

// TestEncodeNormalises: what a caller hands in unclean is stored clean.
func TestEncodeNormalises(t *testing.T) {
	t.Parallel()
	g := &assign.Group{
		StreamPrefix: "orders", Name: "g", DrainingShards: []int{5, 4, 5},
		Members: map[string]*assign.Member{"a": {ID: "a", Current: []int{2, 1}, JoinedAt: time.Date(2026, 11, 29, 11, 0, 0, 0, cet)}},
		Target:  map[string][]int{"a": {2, 1, 1}},
	}
	got := roundTrip(t, g)
	want := &assign.Group{
		StreamPrefix: "orders", Name: "g", DrainingShards: []int{4, 5},
		Members: map[string]*assign.Member{"a": {ID: "a", Current: []int{1, 2}, Revoking: []int{}, Granted: []int{},
			JoinedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}},
		Target: map[string][]int{"a": {1, 2}},
	}
	assertEqual(t, "normalised group", got, want)
	if g.DrainingShards[0] != 5 || g.Target["a"][0] != 2 {
		t.Fatal("encoding changed the caller's group")
	}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	group := func(members string) string {
		return `{"streamPrefix":"orders","name":"g","state":"","groupEpoch":0,"assignmentEpoch":0,
			"metadataVersion":0,"shardCount":0,"drainingShards":[],"members":` + members + `,"target":{},"correctionOpen":false}`
	}
	member := func(id string) string {
		return `{"id":"` + id + `","name":"","state":"ACTIVE","epoch":1,"previousEpoch":0,"metadataVersion":0,
			"maxConcurrency":1,"availableConcurrency":1,"current":[],"revoking":[],"granted":[],"reported":false}`
	}
	payloads := []struct {
		name, payload string
	}{
		{"duplicate member", group("[" + member("a") + "," + member("a") + "]")},
		{"member without id", group("[" + member("") + "]")},
		{"unknown field", group("[]")[:len(group("[]"))-1] + `,"shardOwners":{}}`},
		{"trailing data", group("[]") + "{}"},
		{"another group", `{"streamPrefix":"orders","name":"h"}`},
		{"another prefix", `{"streamPrefix":"orders2","name":"g"}`},
		{"not an object", `[1,2]`},
		{"wrong type", `{"streamPrefix":"orders","name":"g","groupEpoch":"3"}`},
	}
	for _, c := range payloads {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decodeGroupV1([]byte(c.payload), "orders", "g"); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeGroupV1: %v, want ErrCorrupt", err)
			}
		})
	}
	good := mustPayload(t, &assign.Group{StreamPrefix: "orders", Name: "g"})
	frames := []struct {
		name  string
		value []byte
		want  error
	}{
		{"kind mismatch", frame(kindStream, 1, good), ErrCorrupt},
		{"revision 0", frame(kindGroup, 0, good), ErrCorrupt},
		{"envelope not JSON", frameBody([]byte(`schemaVersion 1`)), ErrCorrupt},
		{"unknown envelope field", frameBody([]byte(`{"schemaVersion":1,"kind":"group","x":1,"storeRevision":1,"payload":{}}`)), ErrCorrupt},
		{"schema 3", frameVersion(3, kindGroup, 1, good), ErrUnknownSchema},
		{"schema missing", frameBody([]byte(`{"kind":"group","storeRevision":1,"payload":{}}`)), ErrUnknownSchema},
	}
	for _, c := range frames {
		t.Run(c.name, func(t *testing.T) {
			if _, err := unframe(c.value, kindGroup); !errors.Is(err, c.want) {
				t.Fatalf("unframe: %v, want %v", err, c.want)
			}
		})
	}
	// In the envelope's own shape the payload is left to its decoder (see
	// parseFrame): data after it is refused where the record is read.
	body := func(after string) []byte {
		return frameBody([]byte(`{"schemaVersion":2,"kind":"group","storeRevision":1,"payload":` + string(good) + after + `}`))
	}
	if rev, err := groupHeadRevision(body(""), "orders", "g"); err != nil || rev != 1 {
		t.Fatalf("the well-formed record: revision %d, %v", rev, err)
	}
	for _, after := range []string{`,"x":1`, `{}`, ` 1`} {
		if _, err := groupHeadRevision(body(after), "orders", "g"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("envelope with %q after the payload: %v, want ErrCorrupt", after, err)
		}
	}
}

// TestParseFrame: the envelope's own shape is read without the JSON
// decoder, and any other shape falls back to it with the same result.
func TestParseFrame(t *testing.T) {
	t.Parallel()
	payload := []byte(`{"a":[1,2],"b":"}"}`)
	for _, schema := range []int{1, 2} {
		for _, rev := range []uint64{1, 9, 1 << 40, 1<<64 - 1} {
			body := frameVersion(schema, kindMember, rev, payload)[checksumLen:]
			env, ok := parseFrame(body)
			if !ok || env.SchemaVersion != schema || env.Kind != kindMember || env.StoreRevision != rev || string(env.Payload) != string(payload) {
				t.Fatalf("parseFrame(%s) = %+v, %v", body, env, ok)
			}
			var slow envelope
			if err := strictUnmarshal(body, &slow); err != nil || slow.StoreRevision != rev || slow.Kind != env.Kind || string(slow.Payload) != string(env.Payload) {
				t.Fatalf("the JSON decoder reads %s as %+v, %v", body, slow, err)
			}
		}
	}
	others := []string{
		`{"schemaVersion": 2,"kind":"member","storeRevision":1,"payload":{}}`,     // space
		`{"schemaVersion":02,"kind":"member","storeRevision":1,"payload":{}}`,     // leading zero
		`{"schemaVersion":2,"kind":"mem\u0062er","storeRevision":1,"payload":{}}`, // escape in the kind
		`{"schemaVersion":2,"kind":"member","storeRevision":18446744073709551616,"payload":{}}`,
		`{"kind":"member","schemaVersion":2,"storeRevision":1,"payload":{}}`,
		`{"schemaVersion":2,"kind":"member","storeRevision":-1,"payload":{}}`,
		`{"schemaVersion":2,"kind":"member","storeRevision":1,"payload":}`,
	}
	for _, b := range others {
		if env, ok := parseFrame([]byte(b)); ok {
			t.Errorf("parseFrame(%s) = %+v, want the general decoder", b, env)
		}
	}
}
