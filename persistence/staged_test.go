package persistence

import (
	"context"
	"testing"

	"github.com/rscoord/rscoord/internal/etcdtest"
)

// TestEtcdStagedWriteFinishedByNextOwner: a replica that committed a staged
// group write (its commit point, the group record, is written) and failed
// before applying the staged parts leaves them to the group's next owner,
// which finishes them at its first save. That save must apply them, not
// drop them: the group loads afterwards as the committed write left it plus
// the new change, never with members of before the committed write.
func TestEtcdStagedWriteFinishedByNextOwner(t *testing.T) {
	c := etcdtest.NewCluster(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	open := func() *EtcdStore {
		s, err := OpenEtcd(ctx, EtcdOptions{Client: cli, Prefix: "/data/", Logger: testLogger(t),
			Fence: func(string) (string, int64, bool) { return "/owner", 0, true }}) // owner key never created: the fence holds
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
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
