package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// engine opens one kind of store for the contract tests.
type engine struct {
	name string
	// open returns a new empty store, closed at the end of the test.
	open func(t *testing.T) Store
	// reopen closes s and opens the same data again (a restart). The memory
	// store cannot restart and returns s itself.
	reopen func(t *testing.T, s Store) Store
}

var engines = []engine{
	{
		name: "memory",
		open: func(t *testing.T) Store {
			s := NewMemory()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		reopen: func(_ *testing.T, s Store) Store { return s },
	},
	{
		name: "pebble",
		open: func(t *testing.T) Store {
			return openTestPebble(t, t.TempDir())
		},
		reopen: func(t *testing.T, s Store) Store {
			ps := s.(*PebbleStore)
			if err := ps.Close(); err != nil {
				t.Fatalf("close before reopen: %v", err)
			}
			return openTestPebble(t, ps.dir)
		},
	},
}

func openTestPebble(t *testing.T, dir string) *PebbleStore {
	t.Helper()
	s, err := OpenPebble(dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawKV is the engine under a store, for tests that write what no store
// would (corrupt values, other schema versions).
func rawKV(s Store) kv {
	switch s := s.(type) {
	case *MemoryStore:
		return s.kv
	case *PebbleStore:
		return s.kv
	case *EtcdStore:
		return s.kv
	}
	panic(fmt.Sprintf("unknown store %T", s))
}

// contractCases run against every engine: the memory store must behave as
// the Pebble store does.
var contractCases = []struct {
	name string
	run  func(t *testing.T, e engine)
}{
	{"GroupRoundTripAndRestart", testGroupRoundTrip},
	{"StreamRoundTripAndRestart", testStreamRoundTrip},
	{"StreamAutoscaleRoundTripAndRestart", testStreamAutoscaleRoundTrip},
	{"GroupRevisions", testGroupRevisions},
	{"StreamRevisions", testStreamRevisions},
	{"StreamDelete", testStreamDelete},
	{"RevisionsNeverReused", testRevisionsNeverReused},
	{"CorruptGroupFailsClosed", testCorruptGroup},
	{"UnknownSchemaFailsClosed", testUnknownSchema},
	{"CorruptStreamFailsClosed", testCorruptStream},
	{"PrefixIsolation", testPrefixIsolation},
	{"NoSharedMemory", testNoSharedMemory},
	{"InvalidInput", testInvalidInput},
	{"Closed", testClosed},
	{"CancelledContext", testCancelledContext},
	{"ConcurrentGroups", testConcurrentGroups},
	{"ConcurrentWritersOfOneGroup", testConcurrentWritersOfOneGroup},
	{"AuditRoundTripAndRestart", testAuditRoundTrip},
	{"AuditPaging", testAuditPaging},
	{"AuditCorruptEntryListed", testAuditCorruptEntryListed},
	{"Tombstones", testTombstones},
	{"APITokens", testAPITokens},
}

func TestContract(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			for _, c := range contractCases {
				t.Run(c.name, func(t *testing.T) { c.run(t, e) })
			}
		})
	}
}

var ctx = context.Background()

func mustSaveGroup(t *testing.T, s Store, g *assign.Group, expected uint64) uint64 {
	t.Helper()
	rev, err := s.SaveGroup(ctx, g, nil, expected)
	if err != nil {
		t.Fatalf("SaveGroup %s/%s at %d: %v", g.StreamPrefix, g.Name, expected, err)
	}
	if rev == 0 {
		t.Fatalf("SaveGroup %s/%s returned revision 0", g.StreamPrefix, g.Name)
	}
	return rev
}

func mustLoadGroup(t *testing.T, s Store, prefix, name string) GroupRecord {
	t.Helper()
	rec, err := s.LoadGroup(ctx, prefix, name)
	if err != nil {
		t.Fatalf("LoadGroup %s/%s: %v", prefix, name, err)
	}
	return rec
}

func testGroupRoundTrip(t *testing.T, e engine) {
	s := e.open(t)
	g := richGroup("orders", "billing")
	rev := mustSaveGroup(t, s, g, 0)
	other := mustSaveGroup(t, s, &assign.Group{StreamPrefix: "orders", Name: "audit"}, 0)

	check := func(t *testing.T, s Store) {
		rec := mustLoadGroup(t, s, "orders", "billing")
		if rec.Revision != rev || rec.Err != nil || rec.StreamPrefix != "orders" || rec.Name != "billing" {
			t.Fatalf("record %+v, want revision %d and no error", rec, rev)
		}
		assertEqual(t, "loaded group", rec.Group, durable(g))
		for id, m := range rec.Group.Members {
			if m.Progress != nil || !m.LastHeartbeat.IsZero() || !m.LeaseExpiresAt.IsZero() {
				t.Fatalf("member %s: non-durable fields restored: %+v", id, m)
			}
		}
		all, err := s.LoadGroups(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[0].Name != "audit" || all[1].Name != "billing" {
			t.Fatalf("LoadGroups: %s", dump(all))
		}
		if all[0].Revision != other || all[1].Revision != rev {
			t.Fatalf("LoadGroups revisions %d, %d; want %d, %d", all[0].Revision, all[1].Revision, other, rev)
		}
		assertEqual(t, "LoadGroups group", all[1].Group, durable(g))
		empty := all[0].Group
		if empty.Members == nil || empty.Target == nil || empty.DrainingShards == nil {
			t.Fatalf("empty group not cleaned: %+v", empty)
		}
	}
	t.Run("before restart", func(t *testing.T) { check(t, s) })
	s = e.reopen(t, s)
	t.Run("after restart", func(t *testing.T) { check(t, s) })

	// Epochs and versions continue from the stored ones after a restart.
	g2 := mustLoadGroup(t, s, "orders", "billing").Group
	g2.GroupEpoch++
	rev2 := mustSaveGroup(t, s, g2, rev)
	if rev2 <= rev || rev2 <= other {
		t.Fatalf("revision after restart %d, not above %d and %d", rev2, rev, other)
	}
	if got := mustLoadGroup(t, s, "orders", "billing").Group.GroupEpoch; got != 43 {
		t.Fatalf("group epoch %d, want 43", got)
	}
}

func testStreamRoundTrip(t *testing.T, e engine) {
	s := e.open(t)
	streams, err := s.LoadStreams(ctx)
	if err != nil || streams == nil || len(streams) != 0 {
		t.Fatalf("empty store: LoadStreams = %v, %v; want [] and no error", streams, err)
	}
	want := richStream("orders")
	rev, err := s.SaveStream(ctx, want, 0)
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "billing", ShardCount: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want.Revision = rev
	check := func(t *testing.T, s Store) {
		got, err := s.LoadStreams(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].StreamPrefix != "billing" || got[1].StreamPrefix != "orders" {
			t.Fatalf("LoadStreams not sorted by prefix: %s", dump(got))
		}
		assertEqual(t, "stream orders", got[1], want)
		assertEqual(t, "stream billing", got[0], StreamRecord{
			StreamPrefix: "billing", ShardCount: 1, DrainingShards: []int{},
			Migrations: []MigrationRecord{}, Revision: rev2,
		})
		if groups, err := s.LoadGroups(ctx, "orders"); err != nil || len(groups) != 0 {
			t.Fatalf("stream records listed as groups: %v, %v", groups, err)
		}
	}
	t.Run("before restart", func(t *testing.T) { check(t, s) })
	s = e.reopen(t, s)
	t.Run("after restart", func(t *testing.T) { check(t, s) })
}

func testGroupRevisions(t *testing.T, e engine) {
	s := e.open(t)
	g := &assign.Group{StreamPrefix: "orders", Name: "g"}
	var rev uint64 // the revision this test last got
	steps := []struct {
		name     string
		do       func() (uint64, error)
		wantErr  error
		keepsRev bool
	}{
		{"update before create", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, 7) }, ErrStaleRevision, true},
		{"delete before create", func() (uint64, error) { return 0, s.DeleteGroup(ctx, "orders", "g", 7) }, ErrNotFound, true},
		{"load before create", func() (uint64, error) { r, err := s.LoadGroup(ctx, "orders", "g"); return r.Revision, err }, ErrNotFound, true},
		{"create", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, 0) }, nil, false},
		{"create again", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, 0) }, ErrStaleRevision, true},
		{"update", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, rev) }, nil, false},
		{"update with an old revision", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, rev-1) }, ErrStaleRevision, true},
		{"update with a future revision", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, rev+1) }, ErrStaleRevision, true},
		{"load", func() (uint64, error) { r, err := s.LoadGroup(ctx, "orders", "g"); return r.Revision, err }, nil, true},
		{"delete with a stale revision", func() (uint64, error) { return 0, s.DeleteGroup(ctx, "orders", "g", rev-1) }, ErrStaleRevision, true},
		{"delete with 0", func() (uint64, error) { return 0, s.DeleteGroup(ctx, "orders", "g", 0) }, ErrStaleRevision, true},
		{"delete", func() (uint64, error) { return 0, s.DeleteGroup(ctx, "orders", "g", rev) }, nil, true},
		{"load deleted", func() (uint64, error) { r, err := s.LoadGroup(ctx, "orders", "g"); return r.Revision, err }, ErrNotFound, true},
		{"delete deleted", func() (uint64, error) { return 0, s.DeleteGroup(ctx, "orders", "g", rev) }, ErrNotFound, true},
		{"update deleted", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, rev) }, ErrStaleRevision, true},
		{"create again after delete", func() (uint64, error) { return s.SaveGroup(ctx, g, nil, 0) }, nil, false},
	}
	for _, st := range steps {
		got, err := st.do()
		if !errors.Is(err, st.wantErr) || (st.wantErr == nil) != (err == nil) {
			t.Fatalf("%s: error %v, want %v", st.name, err, st.wantErr)
		}
		switch {
		case err != nil && got != 0:
			t.Fatalf("%s: failed but returned revision %d", st.name, got)
		case st.name == "load" && got != rev:
			t.Fatalf("load: revision %d, want %d", got, rev)
		case !st.keepsRev:
			if got <= rev {
				t.Fatalf("%s: revision %d not above %d", st.name, got, rev)
			}
			rev = got
		}
	}
	if groups, err := s.LoadGroups(ctx, "orders"); err != nil || len(groups) != 1 || groups[0].Revision != rev {
		t.Fatalf("LoadGroups = %s, %v; want one group at %d", dump(groups), err, rev)
	}
}

func testStreamRevisions(t *testing.T, e engine) {
	s := e.open(t)
	rec := StreamRecord{StreamPrefix: "orders", ShardCount: 2}
	if _, err := s.SaveStream(ctx, rec, 3); !errors.Is(err, ErrStaleRevision) {
		t.Fatalf("update before create: %v", err)
	}
	r1, err := s.SaveStream(ctx, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveStream(ctx, rec, 0); !errors.Is(err, ErrStaleRevision) {
		t.Fatalf("create twice: %v", err)
	}
	rec.ShardCount = 3
	rec.Revision = 99 // ignored
	r2, err := s.SaveStream(ctx, rec, r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("update: %d, %v", r2, err)
	}
	rec.ShardCount = 4
	if _, err := s.SaveStream(ctx, rec, r1); !errors.Is(err, ErrStaleRevision) {
		t.Fatalf("stale update: %v", err)
	}
	got, err := s.LoadStreams(ctx)
	if err != nil || len(got) != 1 || got[0].ShardCount != 3 || got[0].Revision != r2 {
		t.Fatalf("LoadStreams = %s, %v; want shard count 3 at revision %d", dump(got), err, r2)
	}
}

// testStreamDelete: a stream record is deleted at its revision only, its
// groups' records stay, and a stream created again under the prefix gets
// a revision above the deleted one, also across a restart.
func testStreamDelete(t *testing.T, e engine) {
	s := e.open(t)
	if err := s.DeleteStream(ctx, "orders", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete before create: %v, want ErrNotFound", err)
	}
	r1, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "orders", ShardCount: 2}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "billing", ShardCount: 1}, 0); err != nil {
		t.Fatal(err)
	}
	mustSaveGroup(t, s, assign.NewGroup("orders", "g", 2, time.Unix(1, 0)), 0)
	if err := s.DeleteStream(ctx, "orders", r1+100); !errors.Is(err, ErrStaleRevision) {
		t.Fatalf("stale delete: %v, want ErrStaleRevision", err)
	}
	if err := s.DeleteStream(ctx, "orders", r1); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := s.DeleteStream(ctx, "orders", r1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete deleted: %v, want ErrNotFound", err)
	}
	s = e.reopen(t, s)
	got, err := s.LoadStreams(ctx)
	if err != nil || len(got) != 1 || got[0].StreamPrefix != "billing" {
		t.Fatalf("LoadStreams after delete = %s, %v; want billing only", dump(got), err)
	}
	if groups, err := s.LoadGroups(ctx, "orders"); err != nil || len(groups) != 1 {
		t.Fatalf("the deleted stream's group: %v, %v; want it left in place", groups, err)
	}
	r2, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "orders", ShardCount: 3}, 0)
	if err != nil || r2 <= r1 {
		t.Fatalf("create again: revision %d after %d, %v", r2, r1, err)
	}
}

// testRevisionsNeverReused: a record deleted and created again, also across
// a restart, gets a revision above the one a caller may still hold.
func testRevisionsNeverReused(t *testing.T, e engine) {
	s := e.open(t)
	g := &assign.Group{StreamPrefix: "orders", Name: "g"}
	seen := map[uint64]string{}
	note := func(rev uint64, what string) {
		if prev, dup := seen[rev]; dup {
			t.Fatalf("revision %d handed out twice: %s and %s", rev, prev, what)
		}
		seen[rev] = what
	}
	rev := mustSaveGroup(t, s, g, 0)
	note(rev, "create")
	rev2 := mustSaveGroup(t, s, g, rev)
	note(rev2, "update")
	if err := s.DeleteGroup(ctx, "orders", "g", rev2); err != nil {
		t.Fatal(err)
	}
	rev3 := mustSaveGroup(t, s, g, 0)
	note(rev3, "recreate")
	if _, err := s.SaveGroup(ctx, g, nil, rev); !errors.Is(err, ErrStaleRevision) {
		t.Fatalf("write with the first incarnation's revision: %v", err)
	}
	s = e.reopen(t, s)
	sr, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "orders"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	note(sr, "stream after restart")
	if sr <= rev3 {
		t.Fatalf("revision after restart %d not above stored %d", sr, rev3)
	}
}

// putRaw stores value under the key of a group, bypassing the store.
func putRaw(t *testing.T, s Store, key, value []byte) {
	t.Helper()
	if es, ok := s.(*EtcdStore); ok {
		// The engine's commit refuses to overwrite an audit entry.
		if _, err := es.etcd.opts.Client.Put(ctx, es.etcd.key(key), string(value)); err != nil {
			t.Fatal(err)
		}
	} else if err := rawKV(s).commit(ctx, []op{putOp(key, value)}); err != nil {
		t.Fatal(err)
	}
	switch s := s.(type) {
	case *MemoryStore:
		s.forget(key)
	case *PebbleStore:
		s.forget(key)
	case *EtcdStore:
		s.forget(key)
	}
}

func getRaw(t *testing.T, s Store, key []byte) []byte {
	t.Helper()
	v, err := rawKV(s).get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// assertFailsClosed checks that group prefix/name reads as failing with
// want while good, a group of the same prefix, loads, and that the broken
// snapshot is neither overwritten nor deleted.
func assertFailsClosed(t *testing.T, s Store, prefix, name string, want error, good *assign.Group, goodRev uint64) {
	t.Helper()
	rec, err := s.LoadGroup(ctx, prefix, name)
	if !errors.Is(err, want) || !errors.Is(rec.Err, want) || rec.Group != nil || rec.Revision != 0 ||
		rec.StreamPrefix != prefix || rec.Name != name {
		t.Fatalf("LoadGroup: %+v, %v; want a record failing with %v", rec, err, want)
	}
	all, err := s.LoadGroups(ctx, prefix)
	if err != nil {
		t.Fatalf("LoadGroups failed as a whole: %v", err)
	}
	var sawBad, sawGood bool
	for _, r := range all {
		switch r.Name {
		case name:
			sawBad = true
			if !errors.Is(r.Err, want) || r.Group != nil || r.StreamPrefix != prefix {
				t.Fatalf("LoadGroups: broken record %+v, want Err %v", r, want)
			}
		case good.Name:
			sawGood = true
			if r.Err != nil || r.Revision != goodRev {
				t.Fatalf("LoadGroups: good record %+v", r)
			}
			assertEqual(t, "good group", r.Group, durable(good))
		}
	}
	if !sawBad || !sawGood || len(all) != 2 {
		t.Fatalf("LoadGroups: %s", dump(all))
	}
	g := &assign.Group{StreamPrefix: prefix, Name: name}
	for _, expected := range []uint64{0, 1, goodRev} {
		if _, err := s.SaveGroup(ctx, g, nil, expected); !errors.Is(err, want) {
			t.Fatalf("SaveGroup over a broken snapshot at %d: %v, want %v", expected, err, want)
		}
		if err := s.DeleteGroup(ctx, prefix, name, expected); !errors.Is(err, want) {
			t.Fatalf("DeleteGroup of a broken snapshot at %d: %v, want %v", expected, err, want)
		}
	}
}

func testCorruptGroup(t *testing.T, e engine) {
	s := e.open(t)
	good := richGroup("orders", "good")
	goodRev := mustSaveGroup(t, s, good, 0)
	bad := richGroup("orders", "bad")
	mustSaveGroup(t, s, bad, 0)
	key := groupKey("orders", "bad")
	orig := getRaw(t, s, key)
	other := frame(kindGroup, 5, mustPayload(t, &assign.Group{StreamPrefix: "orders", Name: "good"}))
	cases := []struct {
		name  string
		value []byte
	}{
		{"first byte flipped", flip(orig, 0)},
		{"byte in revision flipped", flip(orig, checksumLen+bytesIndex(t, orig[checksumLen:], `"storeRevision":`)+len(`"storeRevision":`))},
		{"middle byte flipped", flip(orig, len(orig)/2)},
		{"last byte flipped", flip(orig, len(orig)-1)},
		{"truncated", orig[:len(orig)-10]},
		{"empty", []byte{}},
		{"shorter than checksum", []byte{1, 2}},
		{"another group's snapshot", other},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			putRaw(t, s, key, c.value)
			assertFailsClosed(t, s, "orders", "bad", ErrCorrupt, good, goodRev)
		})
	}
	s = e.reopen(t, s)
	assertFailsClosed(t, s, "orders", "bad", ErrCorrupt, good, goodRev)
}

func testUnknownSchema(t *testing.T, e engine) {
	s := e.open(t)
	good := richGroup("orders", "good")
	goodRev := mustSaveGroup(t, s, good, 0)
	payload := mustPayload(t, richGroup("orders", "new"))
	for _, version := range []int{3, 0, -1} {
		t.Run(fmt.Sprint("schemaVersion ", version), func(t *testing.T) {
			v := frameVersion(version, kindGroup, 9, payload)
			putRaw(t, s, groupKey("orders", "new"), v)
			assertFailsClosed(t, s, "orders", "new", ErrUnknownSchema, good, goodRev)
		})
	}
	t.Run("envelope of a newer schema", func(t *testing.T) {
		v := frameBody([]byte(`{"schemaVersion":3,"revision":{"node":1},"body":"…"}`))
		putRaw(t, s, groupKey("orders", "new"), v)
		assertFailsClosed(t, s, "orders", "new", ErrUnknownSchema, good, goodRev)
	})
}

func testCorruptStream(t *testing.T, e engine) {
	s := e.open(t)
	rev, err := s.SaveStream(ctx, richStream("a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveStream(ctx, richStream("b"), 0); err != nil {
		t.Fatal(err)
	}
	putRaw(t, s, streamKey("b"), flip(getRaw(t, s, streamKey("b")), 20))
	v := frameVersion(3, kindStream, 4, []byte(`{}`))
	putRaw(t, s, streamKey("c"), v)
	got, err := s.LoadStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := richStream("a")
	want.Revision = rev
	if len(got) != 3 {
		t.Fatalf("LoadStreams: %s", dump(got))
	}
	assertEqual(t, "good stream", got[0], want)
	for i, wantErr := range map[int]error{1: ErrCorrupt, 2: ErrUnknownSchema} {
		r := got[i]
		if !errors.Is(r.Err, wantErr) || r.StreamPrefix != string(rune('a'+i)) || r.ShardCount != 0 || r.Revision != 0 {
			t.Fatalf("stream %d: %+v, want only prefix and Err %v", i, r, wantErr)
		}
	}
	if _, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "b"}, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("SaveStream over a corrupt record: %v", err)
	}
}

func testPrefixIsolation(t *testing.T, e engine) {
	s := e.open(t)
	prefixes := []string{"order", "orders", "orders2", "orders.eu", "orders-x", "orders:1", "orders_"}
	names := []string{"g", "g2", "g@x", "default"}
	revs := map[string]uint64{}
	for _, p := range prefixes {
		for _, n := range names {
			revs[p+"/"+n] = mustSaveGroup(t, s, &assign.Group{StreamPrefix: p, Name: n, ShardCount: len(p)}, 0)
		}
		if _, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: p}, 0); err != nil {
			t.Fatal(err)
		}
	}
	sortedNames := slices.Sorted(slices.Values(names))
	for _, p := range prefixes {
		got, err := s.LoadGroups(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var gotNames []string
		for _, r := range got {
			if r.StreamPrefix != p || r.Group == nil || r.Group.StreamPrefix != p || r.Group.ShardCount != len(p) ||
				r.Revision != revs[p+"/"+r.Name] {
				t.Fatalf("LoadGroups(%q) returned %+v", p, r)
			}
			gotNames = append(gotNames, r.Name)
		}
		assertEqual(t, "groups of "+p, gotNames, sortedNames)
	}
	if got, err := s.LoadGroups(ctx, "ord"); err != nil || len(got) != 0 {
		t.Fatalf("LoadGroups(ord) = %v, %v", got, err)
	}
	streams, err := s.LoadStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gotPrefixes []string
	for _, r := range streams {
		gotPrefixes = append(gotPrefixes, r.StreamPrefix)
	}
	assertEqual(t, "stream prefixes", gotPrefixes, slices.Sorted(slices.Values(prefixes)))
	if err := s.DeleteGroup(ctx, "orders", "g", revs["orders/g"]); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"order", "orders2", "orders.eu"} {
		if _, err := s.LoadGroup(ctx, p, "g"); err != nil {
			t.Fatalf("deleting orders/g touched %s/g: %v", p, err)
		}
	}
}

func testNoSharedMemory(t *testing.T, e engine) {
	s := e.open(t)
	g := richGroup("orders", "g")
	want := durable(g)
	rev := mustSaveGroup(t, s, g, 0)
	// The store kept no reference to g.
	g.Members["m-active"].Current[0] = 99
	g.Target["m-active"][0] = 99
	g.DrainingShards[0] = 99
	rec := mustLoadGroup(t, s, "orders", "g")
	assertEqual(t, "group after the caller changed its copy", rec.Group, want)
	// A loaded group shares nothing with the store or with other loads.
	rec.Group.Members["m-active"].Current[0] = 77
	rec.Group.Target["m-active"] = nil
	delete(rec.Group.Members, "m-starting")
	again := mustLoadGroup(t, s, "orders", "g")
	assertEqual(t, "group after the caller changed a loaded copy", again.Group, want)
	if again.Revision != rev {
		t.Fatalf("revision %d, want %d", again.Revision, rev)
	}
}

func testInvalidInput(t *testing.T, e engine) {
	s := e.open(t)
	long := make([]byte, protocol.MaxNameLength+1)
	for i := range long {
		long[i] = 'a'
	}
	cases := []struct {
		name string
		g    *assign.Group
	}{
		{"nil group", nil},
		{"empty prefix", &assign.Group{Name: "g"}},
		{"empty name", &assign.Group{StreamPrefix: "orders"}},
		{"separator in prefix", &assign.Group{StreamPrefix: "orders\x00g", Name: "g"}},
		{"separator in name", &assign.Group{StreamPrefix: "orders", Name: "a\x00b"}},
		{"brace in prefix", &assign.Group{StreamPrefix: "{orders}", Name: "g"}},
		{"@ in prefix", &assign.Group{StreamPrefix: "orders@x", Name: "g"}},
		{"slash in name", &assign.Group{StreamPrefix: "orders", Name: "a/b"}},
		{"name too long", &assign.Group{StreamPrefix: "orders", Name: string(long)}},
		{"member under another id", &assign.Group{StreamPrefix: "orders", Name: "g",
			Members: map[string]*assign.Member{"a": {ID: "b"}}}},
		{"nil member", &assign.Group{StreamPrefix: "orders", Name: "g",
			Members: map[string]*assign.Member{"a": nil}}},
	}
	for _, c := range cases {
		if rev, err := s.SaveGroup(ctx, c.g, nil, 0); err == nil || rev != 0 {
			t.Errorf("SaveGroup(%s) = %d, %v; want an error", c.name, rev, err)
		}
	}
	if _, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "a\x00"}, 0); err == nil {
		t.Error("SaveStream with a separator in the prefix succeeded")
	}
	if _, err := s.LoadGroups(ctx, "orders\x00"); err == nil {
		t.Error("LoadGroups with a separator in the prefix succeeded")
	}
	if _, err := s.LoadGroup(ctx, "orders", ""); err == nil {
		t.Error("LoadGroup with an empty name succeeded")
	}
	if err := s.DeleteGroup(ctx, "", "g", 1); err == nil {
		t.Error("DeleteGroup with an empty prefix succeeded")
	}
	if got, err := s.LoadGroups(ctx, "orders"); err != nil || len(got) != 0 {
		t.Fatalf("invalid input was stored: %s, %v", dump(got), err)
	}
}

func testClosed(t *testing.T, e engine) {
	s := e.open(t)
	rev := mustSaveGroup(t, s, &assign.Group{StreamPrefix: "orders", Name: "g"}, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"LoadStreams": func() error { _, err := s.LoadStreams(ctx); return err },
		"LoadGroups":  func() error { _, err := s.LoadGroups(ctx, "orders"); return err },
		"LoadGroup":   func() error { _, err := s.LoadGroup(ctx, "orders", "g"); return err },
		"SaveStream":  func() error { _, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: "orders"}, 0); return err },
		"SaveGroup": func() error {
			_, err := s.SaveGroup(ctx, &assign.Group{StreamPrefix: "orders", Name: "g"}, nil, rev)
			return err
		},
		"DeleteGroup": func() error { return s.DeleteGroup(ctx, "orders", "g", rev) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func testCancelledContext(t *testing.T, e engine) {
	s := e.open(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	g := &assign.Group{StreamPrefix: "orders", Name: "g"}
	if _, err := s.SaveGroup(cctx, g, nil, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("SaveGroup: %v", err)
	}
	if _, err := s.LoadGroups(cctx, "orders"); !errors.Is(err, context.Canceled) {
		t.Fatalf("LoadGroups: %v", err)
	}
	if _, err := s.LoadGroup(ctx, "orders", "g"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a cancelled save was stored: %v", err)
	}
}

// testConcurrentGroups: 32 group actors each save their own group 50 times.
func testConcurrentGroups(t *testing.T, e engine) {
	const actors, saves = 32, 50
	s := e.open(t)
	var wg sync.WaitGroup
	final := make([]uint64, actors)
	revs := make([][]uint64, actors)
	errs := make(chan error, actors)
	for a := range actors {
		wg.Go(func() {
			g := richGroup("orders", fmt.Sprintf("g%02d", a))
			var rev uint64
			for i := range saves {
				g.GroupEpoch = int64(i + 1)
				next, err := s.SaveGroup(ctx, g, nil, rev)
				if err != nil {
					errs <- fmt.Errorf("actor %d save %d: %w", a, i, err)
					return
				}
				if next <= rev {
					errs <- fmt.Errorf("actor %d save %d: revision %d not above %d", a, i, next, rev)
					return
				}
				rev = next
				revs[a] = append(revs[a], rev)
			}
			final[a] = rev
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, rs := range revs {
		for _, r := range rs {
			if seen[r] {
				t.Fatalf("revision %d handed out twice", r)
			}
			seen[r] = true
		}
	}
	got, err := s.LoadGroups(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != actors {
		t.Fatalf("%d groups, want %d", len(got), actors)
	}
	for a, r := range got {
		if r.Err != nil || r.Revision != final[a] || r.Group.GroupEpoch != saves {
			t.Fatalf("group %d: revision %d epoch %d err %v; want revision %d epoch %d", a, r.Revision, r.Group.GroupEpoch, r.Err, final[a], saves)
		}
	}
}

// testConcurrentWritersOfOneGroup: writers racing with the same expected
// revision, exactly one wins each round (the check and the write are one
// step).
func testConcurrentWritersOfOneGroup(t *testing.T, e engine) {
	const writers, rounds = 8, 20
	s := e.open(t)
	g := &assign.Group{StreamPrefix: "orders", Name: "g"}
	rev := mustSaveGroup(t, s, g, 0)
	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []uint64
		for w := range writers {
			wg.Go(func() {
				mine := &assign.Group{StreamPrefix: "orders", Name: "g", GroupEpoch: int64(w)}
				next, err := s.SaveGroup(ctx, mine, nil, rev)
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, next)
					mu.Unlock()
				case !errors.Is(err, ErrStaleRevision):
					t.Errorf("round %d writer %d: %v", round, w, err)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d writers succeeded with revision %d, want exactly one", round, len(won), rev)
		}
		rev = won[0]
		if got := mustLoadGroup(t, s, "orders", "g").Revision; got != rev {
			t.Fatalf("round %d: stored revision %d, winner got %d", round, got, rev)
		}
	}
}
