package persistence

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestEtcdStagedWriteFinishedByNextOwner: a replica that committed a staged
// group write (its commit point, the group record, is written) and failed
// before applying the staged parts leaves them to the group's next owner,
// which finishes them at its first save. That save must apply them, not
// drop them: the group loads afterwards as the committed write left it plus
// the new change, never with members of before the committed write.
func TestEtcdStagedWriteFinishedByNextOwner(t *testing.T) {
	t.Parallel()
	cli := sharedEtcdClient(t)
	ctx := context.Background()
	open := func() *EtcdStore { return openFenced(t, cli) }
	a := open()
	counter := &limitedKV{kv: a.kv, lim: a.kv.limits()}
	a.kv = counter
	old := bigGroup(150, 2)
	rev := mustSaveGroup(t, a, old, 0)
	// A staged save of n parts is n staged commits, the group record, and
	// n applies.
	parts := (counter.n - 1) / 2
	if parts < 2 {
		t.Fatalf("the save took %d commits; the test needs a staged one", counter.n)
	}
	next := bigGroup(150, 2)
	for _, m := range next.Members {
		m.Epoch += 5
	}
	next.GroupEpoch += 5
	counter.failAt = counter.n + parts + 2 // the first apply, after the commit point
	if _, err := a.SaveGroup(ctx, next, nil, rev); err == nil {
		t.Fatal("the injected failure was not reported")
	}

	b := open()
	rec := mustLoadGroup(t, b, "orders", "big")
	assertSameGroup(t, "the group the next owner loads", rec.Group, durable(next))
	id := "consumer-00007-7f9c2d"
	rec.Group.Members[id].Reported = false
	if _, err := b.SaveGroup(ctx, rec.Group, &Changes{Members: []string{id}}, rec.Revision); err != nil {
		t.Fatal(err)
	}
	want := durable(next)
	want.Members[id].Reported = false
	got, err := open().LoadGroup(ctx, "orders", "big")
	if err != nil {
		t.Fatalf("load after the next owner's save: %v", err)
	}
	assertSameGroup(t, "the group after the next owner's save", got.Group, want)
}

// failingKV fails the commit numbered failAt (1-based), as a crash at that
// point would leave the engine; it closes the engine under it.
type failingKV struct {
	kv
	mu     sync.Mutex
	n      int
	failAt int
}

func (f *failingKV) commit(ctx context.Context, ops []op) error {
	f.mu.Lock()
	f.n++
	fail := f.n == f.failAt
	f.mu.Unlock()
	if fail {
		return errors.New("injected crash")
	}
	return f.kv.commit(ctx, ops)
}

// TestCorruptStagedWriteFailsItsGroupOnly: a committed staged write whose
// staged value no longer decodes (a flipped byte) makes its group fail
// closed, as a corrupt group record does, and nothing else: the store
// opens, the other groups of the stream and the streams load, and a save
// of the damaged group is refused without failing the store.
func TestCorruptStagedWriteFailsItsGroupOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := OpenPebble(dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveStream(ctx, richStream("orders"), 0); err != nil {
		t.Fatal(err)
	}
	small := richGroup("orders", "small")
	smallRev := mustSaveGroup(t, s, small, 0)
	engine := s.kv
	f := &failingKV{kv: engine}
	s.kv = f
	old := bigGroup(3000, 2)
	rev := mustSaveGroup(t, s, old, 0)
	parts := (f.n - 1) / 2
	if parts < 2 {
		t.Fatalf("the save took %d commits; the test needs a staged one", f.n)
	}
	next := bigGroup(3000, 2)
	for _, m := range next.Members {
		m.Epoch += 5
	}
	f.failAt = f.n + parts + 2 // the first apply, after the commit point
	if _, err := s.SaveGroup(ctx, next, nil, rev); err == nil {
		t.Fatal("the injected failure was not reported")
	}
	key := stageKey("orders", "big", rev+1, 1)
	v, err := engine.get(ctx, key)
	if err != nil {
		t.Fatalf("staged value %q: %v", key, err)
	}
	if err := engine.commit(ctx, []op{putOp(key, flip(v, len(v)/2))}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	s = openTestPebble(t, dir)
	recs, err := s.LoadGroups(ctx, "orders")
	if err != nil || len(recs) != 2 {
		t.Fatalf("groups of the stream: %d, %v; want the damaged one and the other", len(recs), err)
	}
	for _, r := range recs {
		switch r.Name {
		case "big":
			if !errors.Is(r.Err, ErrCorrupt) || r.Group != nil {
				t.Fatalf("the damaged group loads with %v; want ErrCorrupt and no group", r.Err)
			}
		case "small":
			if r.Err != nil || r.Revision != smallRev {
				t.Fatalf("the other group: revision %d, %v", r.Revision, r.Err)
			}
		}
	}
	if _, err := s.LoadGroup(ctx, "orders", "big"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("LoadGroup of the damaged group: %v; want ErrCorrupt", err)
	}
	if streams, err := s.LoadStreams(ctx); err != nil || len(streams) != 1 || streams[0].Err != nil {
		t.Fatalf("streams: %+v %v", streams, err)
	}
	for _, expected := range []uint64{0, rev, rev + 1} {
		if _, err := s.SaveGroup(ctx, next, nil, expected); err == nil || errors.Is(err, ErrFailed) {
			t.Fatalf("save of the damaged group expecting %d: %v; want a refusal that leaves the store serving", expected, err)
		}
	}
	if err := s.Err(ctx); err != nil {
		t.Fatalf("the store after the refused saves: %v", err)
	}
	small.GroupEpoch++
	mustSaveGroup(t, s, small, smallRev)
}
