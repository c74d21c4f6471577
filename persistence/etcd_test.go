package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdEngine runs stores on the shared etcd cluster, each store under a
// key prefix of its own below t's.
func etcdEngine(t *testing.T) engine {
	cli := sharedEtcdClient(t)
	base := etcdPrefix(t)
	var n atomic.Int64
	open := func(t *testing.T, prefix string) *EtcdStore {
		t.Helper()
		s, err := OpenEtcd(context.Background(), EtcdOptions{Client: cli, Prefix: prefix, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("open etcd store %s: %v", prefix, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return engine{
		name: "etcd",
		open: func(t *testing.T) Store {
			return open(t, fmt.Sprintf("%s%d/", base, n.Add(1)))
		},
		reopen: func(t *testing.T, s Store) Store {
			es := s.(*EtcdStore)
			if err := es.Close(); err != nil {
				t.Fatalf("close before reopen: %v", err)
			}
			return open(t, es.etcd.opts.Prefix)
		},
	}
}

// TestContractEtcd runs the store contract against a real etcd cluster.
func TestContractEtcd(t *testing.T) {
	e := etcdEngine(t)
	for _, c := range contractCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, e) })
	}
}

// fences is a test double of the cluster's owner keys: unit → owner key
// and its create revision, as this replica believes it holds them.
type fences map[string][2]any

func (f fences) lookup(unit string) (string, int64, bool) {
	v, ok := f[unit]
	if !ok {
		return "", 0, false
	}
	return v[0].(string), v[1].(int64), true
}

// Two replicas share one etcd store: each writes only the groups whose
// owner key it holds; a write after its key was deleted and created anew by
// the other is refused with ErrNotOwner, nothing is written, the store
// stays usable, and revisions and epochs never go back.
func TestEtcdFencedWrites(t *testing.T) {
	cli := sharedEtcdClient(t)
	p := etcdPrefix(t)
	ctx := context.Background()
	claim := func(key string) int64 {
		t.Helper()
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "x")).Commit()
		if err != nil || !resp.Succeeded {
			t.Fatalf("claim %s: %v %v", key, resp, err)
		}
		return resp.Header.Revision
	}
	owner := p + "owners/group/orders/billing"
	aFences, bFences := fences{}, fences{}
	open := func(f fences) *EtcdStore {
		s, err := OpenEtcd(ctx, EtcdOptions{Client: cli, Prefix: p + "data/", Fence: f.lookup, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(aFences), open(bFences)

	g := richGroup("orders", "billing")
	if _, err := a.SaveGroup(ctx, g, nil, 0); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("write without an owner key: %v, want ErrNotOwner", err)
	}
	aFences[GroupUnit("orders", "billing")] = [2]any{owner, claim(owner)}
	rev1, err := a.SaveGroup(ctx, g, nil, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Ownership moves: a's key goes (lease lapsed), b claims anew and
	// loads the group, continuing its epochs.
	if _, err := cli.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	bFences[GroupUnit("orders", "billing")] = [2]any{owner, claim(owner)}
	rec, err := b.LoadGroup(ctx, "orders", "billing")
	if err != nil {
		t.Fatal(err)
	}
	rec.Group.GroupEpoch++
	rev2, err := b.SaveGroup(ctx, rec.Group, nil, rec.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev1 {
		t.Fatalf("revision went back: %d after %d", rev2, rev1)
	}

	// The deposed a still believes it owns the group: its write is refused.
	stale := durable(g)
	stale.GroupEpoch = 1
	if _, err := a.SaveGroup(ctx, stale, nil, rev1); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("deposed owner's write: %v, want ErrNotOwner", err)
	}
	got, err := b.LoadGroup(ctx, "orders", "billing")
	if err != nil || got.Group.GroupEpoch != 43 || got.Revision != rev2 {
		t.Fatalf("after the refused write: %+v %v; want epoch 43 at revision %d", got.Group, err, rev2)
	}
	// a is not failed: it still writes what it owns and appends audit.
	aFences[GroupUnit("orders", "other")] = [2]any{p + "owners/o", claim(p + "owners/o")}
	if _, err := a.SaveGroup(ctx, &assign.Group{StreamPrefix: "orders", Name: "other"}, nil, 0); err != nil {
		t.Fatalf("a's write of a group it owns after a refusal: %v", err)
	}

	// Ownership comes back to a: it loads b's snapshot and goes on from it
	// (its own cached revision must not win).
	if _, err := cli.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	aFences[GroupUnit("orders", "billing")] = [2]any{owner, claim(owner)}
	back, err := a.LoadGroup(ctx, "orders", "billing")
	if err != nil {
		t.Fatal(err)
	}
	back.Group.GroupEpoch++
	rev3, err := a.SaveGroup(ctx, back.Group, nil, back.Revision)
	if err != nil {
		t.Fatalf("write after ownership came back: %v", err)
	}
	if rev3 <= rev2 || back.Group.GroupEpoch != 44 {
		t.Fatalf("revision %d after %d, epoch %d", rev3, rev2, back.Group.GroupEpoch)
	}
}

// Replicas appending audit entries at once never overwrite each other's.
func TestEtcdAuditFromTwoReplicas(t *testing.T) {
	e := etcdEngine(t)
	a := e.open(t)
	b, err := OpenEtcd(context.Background(), EtcdOptions{Client: rawKV(a).(*etcdKV).opts.Client, Prefix: rawKV(a).(*etcdKV).opts.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const each = 20
	errs := make(chan error, 2*each)
	for _, s := range []Store{a, b} {
		go func() {
			for i := range each {
				_, err := s.AppendAudit(context.Background(), auditEntry(i, "orders"))
				errs <- err
			}
		}()
	}
	for range 2 * each {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	list, err := a.ListAudit(context.Background(), AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2*each {
		t.Fatalf("%d audit entries, want %d", len(list), 2*each)
	}
}

// With etcd's quorum lost a write fails (its outcome unknown) within the
// request timeout instead of hanging.
func TestEtcdWriteWithoutQuorumFails(t *testing.T) {
	c := etcdtest.NewCluster(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenEtcd(context.Background(), EtcdOptions{Client: cli, Prefix: "/q/", Timeout: 2 * time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range c.Members[1:] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err = s.SaveGroup(context.Background(), &assign.Group{StreamPrefix: "orders", Name: "g"}, nil, 0)
	if err == nil {
		t.Fatal("write succeeded without quorum")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("write without quorum took %v", d)
	}
}

// StreamPrefixes lists exactly the streams stored, by their keys, and not
// those of another store's prefix on the same etcd cluster.
func TestEtcdStreamPrefixes(t *testing.T) {
	e := etcdEngine(t)
	s, other := e.open(t).(*EtcdStore), e.open(t).(*EtcdStore)
	ctx := context.Background()
	if got, err := s.StreamPrefixes(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v %v", got, err)
	}
	for _, p := range []string{"orders", "orders2", "billing"} {
		if _, err := s.SaveStream(ctx, StreamRecord{StreamPrefix: p, ShardCount: 2}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.SaveStream(ctx, StreamRecord{StreamPrefix: "elsewhere", ShardCount: 1}, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.StreamPrefixes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"billing", "orders", "orders2"}; !slices.Equal(got, want) {
		t.Fatalf("stream prefixes %v, want %v", got, want)
	}
}

// A group this replica wrote, then deleted by the replica that owned it
// meanwhile, can be created again here once ownership comes back: the
// revision this replica cached before it lost the group must not make the
// create (expected revision 0) fail as stale. The load on reclaim sees the
// tombstone, and the create continues above it.
func TestEtcdCreateAfterOtherReplicaDeleted(t *testing.T) {
	cli := sharedEtcdClient(t)
	ctx := context.Background()
	open := func() *EtcdStore { return openFenced(t, cli) }
	a, b := open(), open()
	g := richGroup("orders", "billing")
	if _, err := a.SaveGroup(ctx, g, nil, 0); err != nil {
		t.Fatal(err)
	}
	// Ownership moves to b, which loads the group and deletes it.
	recs, err := b.LoadGroups(ctx, "orders")
	if err != nil || len(recs) != 1 {
		t.Fatalf("b's load: %v %v", recs, err)
	}
	if err := b.DeleteGroup(ctx, "orders", "billing", recs[0].Revision); err != nil {
		t.Fatal(err)
	}
	// Back to a: it loads the stream's groups (none), reads the tombstone
	// and creates the group above it.
	if recs, err := a.LoadGroups(ctx, "orders"); err != nil || len(recs) != 0 {
		t.Fatalf("a's load after the delete: %v %v", recs, err)
	}
	tomb, err := a.LoadTombstone(ctx, "orders", "billing")
	if err != nil {
		t.Fatal(err)
	}
	again := assign.NewGroupAfter(tomb, "orders", "billing", 4, time.Now())
	rev, err := a.SaveGroup(ctx, again, nil, 0)
	if err != nil {
		t.Fatalf("create after the other replica deleted the group: %v", err)
	}
	got, err := b.LoadGroup(ctx, "orders", "billing")
	if err != nil || got.Revision != rev || got.Group.GroupEpoch < g.GroupEpoch {
		t.Fatalf("after the create: %+v %v; want revision %d, group epoch at least %d", got.Group, err, rev, g.GroupEpoch)
	}
}

// openFenced opens an etcd store under t's prefix whose writes are fenced
// on an owner key never created: the fence holds (create revision 0), as
// for a replica that owns every unit. Closed in t.Cleanup.
func openFenced(t *testing.T, cli *clientv3.Client) *EtcdStore {
	t.Helper()
	p := etcdPrefix(t)
	s, err := OpenEtcd(context.Background(), EtcdOptions{Client: cli, Prefix: p + "data/", Logger: testLogger(t),
		Fence: func(string) (string, int64, bool) { return p + "owner", 0, true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A stream deleted through one store can be created again through
// another store on the same data that had written it before: the second
// store's cached revision does not refuse the create.
func TestEtcdStreamCreatedAgainAfterAnotherStoreDeletedIt(t *testing.T) {
	cli := sharedEtcdClient(t)
	ctx := context.Background()
	open := func() *EtcdStore {
		s, err := OpenEtcd(ctx, EtcdOptions{Client: cli, Prefix: etcdPrefix(t) + "data/", Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(), open()
	// b created the stream and so caches its revision; a took it over.
	rev1, err := b.SaveStream(ctx, StreamRecord{StreamPrefix: "orders", ShardCount: 2}, 0)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := a.SaveStream(ctx, StreamRecord{StreamPrefix: "orders", ShardCount: 3}, rev1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteStream(ctx, "orders", rev); err != nil {
		t.Fatal(err)
	}
	again, err := b.SaveStream(ctx, StreamRecord{StreamPrefix: "orders", ShardCount: 3}, 0)
	if err != nil || again <= rev {
		t.Fatalf("create again through b: revision %d after %d, %v", again, rev, err)
	}
	if _, err := b.SaveStream(ctx, StreamRecord{StreamPrefix: "orders", ShardCount: 4}, 0); !errors.Is(err, ErrStaleRevision) {
		t.Fatalf("a second create through b: %v, want ErrStaleRevision", err)
	}
}
