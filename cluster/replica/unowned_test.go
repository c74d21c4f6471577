package replica

import (
	"context"
	"log/slog"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/persistence"
)

// TestGroupsUnownedGauge drives rscoord_cluster_groups_unowned, as a
// replica publishes it, through every state a stream's ownership takes
// on a real 3-member etcd: stored but claimed by nobody, claimed by this
// replica, claimed by another, the other replica dead (its client gone,
// its lease lapsing as after a SIGKILL), and this replica cut off from
// etcd (the only member its lease and watches talk to frozen): its stale
// view still says it runs its stream, yet its lease is no longer certain,
// so every group counts; and the store unreadable: no count is published,
// rscoord_cluster_store_readable is 0. Each state is made here, not raced
// for: the replica reading the gauge runs no placement.
func TestGroupsUnownedGauge(t *testing.T) {
	etcd := etcdtest.NewCluster(t)
	ctx := t.Context()
	const root = "/unowned/"
	client := func() *clientv3.Client {
		cli, err := etcd.Client()
		if err != nil {
			t.Fatal(err)
		}
		return cli
	}
	// This replica's lease and watches go through member 0 alone; its
	// store reads through the two others, which keep a quorum while
	// member 0 is frozen.
	cliA, err := etcd.ClientOf(etcd.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	cliStore, err := etcd.ClientOf(etcd.Members[1].ClientURL, etcd.Members[2].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	cliB := client()
	store, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{Client: cliStore, Prefix: root + "data/", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Two streams: orders with two groups, billing with one.
	now := time.Now()
	for prefix, groups := range map[string][]string{"orders": {"audit", "ship"}, "billing": {"invoice"}} {
		if _, err := store.SaveStream(ctx, persistence.StreamRecord{StreamPrefix: prefix, ShardCount: 2}, 0); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if _, err := store.SaveGroup(ctx, assign.NewGroup(prefix, g, 2, now), nil, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := joinTestNode(t, cliA, root, "a"), joinTestNode(t, cliB, root, "b")
	rep := NewRunner(cliA, a, slog.New(slog.DiscardHandler), nil)
	rep.store, rep.keys = store, store
	m := metrics.New()
	gctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep.publishGauges(gctx, m)
	}()
	defer func() { stop(); <-done }()

	gauge := func(name string) (float64, bool) {
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				return metricValue(f), true
			}
		}
		return 0, false
	}
	// expect waits for the gauge (published every second) to read want.
	expect := func(state string, want float64) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got, ok := gauge(metrics.ClusterGroupsUnowned)
			if readable, _ := gauge(metrics.ClusterStoreReadable); ok && got == want && readable == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s = %v (published %v), want %v", state, metrics.ClusterGroupsUnowned, got, ok, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	claim := func(n *cluster.Node, prefix string) {
		t.Helper()
		if _, err := n.Claim(ctx, streamUnit(prefix)); err != nil {
			t.Fatal(err)
		}
	}

	expect("both streams stored, neither claimed", 3)
	claim(a, "orders")
	expect("orders claimed by this replica", 1)
	claim(b, "billing")
	expect("billing claimed by the other replica", 0)

	// The other replica dies: nothing renews its lease, which lapses
	// (with its registration and its owner key of billing).
	if err := cliB.Close(); err != nil {
		t.Fatal(err)
	}
	expect("the other replica dead, its lease lapsed", 1)

	// This replica is cut off from etcd: nothing renews its lease, and
	// its watches, frozen with member 0, still show it holding orders.
	if err := etcd.Members[0].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Members[0].Resume() }) // before the Leaves: they need it
	expect("this replica cut off, its lease uncertain", 3)
	if a.Valid() {
		t.Fatal("a replica cut off from etcd still counts its lease certain")
	}
	if h, ok := a.Holder(streamUnit("orders")); !ok || h.ID != "a" {
		t.Fatalf("the frozen view should still show a holding orders, shows %v %v: the state under test was not made", h, ok)
	}

	// The store cannot be read at all (its two members frozen too): no
	// count, so none is published, not the last one; the store gauge
	// says why.
	for _, mb := range etcd.Members[1:] {
		if err := mb.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mb.Resume() })
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, published := gauge(metrics.ClusterGroupsUnowned)
		readable, ok := gauge(metrics.ClusterStoreReadable)
		if !published && ok && readable == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store unreadable: %s published %v, %s = %v (published %v); want no count and 0",
				metrics.ClusterGroupsUnowned, published, metrics.ClusterStoreReadable, readable, ok)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metricValue is the value of a one-sample gauge family.
func metricValue(f *dto.MetricFamily) float64 {
	if ms := f.GetMetric(); len(ms) == 1 {
		return ms[0].GetGauge().GetValue()
	}
	return -1
}

// joinTestNode joins the cluster under root as replica id, with the
// shortest etcd lease and an advertise URL nothing listens on; it leaves
// in t.Cleanup (a no-op for a replica closed before).
func joinTestNode(t *testing.T, cli *clientv3.Client, root, id string) *cluster.Node {
	t.Helper()
	n, err := cluster.Join(t.Context(), cluster.Options{Client: cli, Root: root, ID: id,
		AdvertiseURL: "http://127.0.0.1:1", LeaseTTL: cluster.MinLeaseTTL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Leave(context.Background()) })
	return n
}
