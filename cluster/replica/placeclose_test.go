package replica

import (
	"context"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/persistence"
)

// TestReplicaCloseStopsItsLoops: closing a replica stops its placement
// loop and its gauges before it closes the etcd client they read, even
// while the context they were started with still runs (an error path of
// serve closes the replica before it cancels that context).
func TestReplicaCloseStopsItsLoops(t *testing.T) {
	etcd := etcdtest.NewCluster(t)
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	cli, err := etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	storeCli, err := etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { storeCli.Close() })
	store, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{Client: storeCli, Prefix: "/close/data/", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	node := joinTestNode(t, cli, "/close/", "a")
	coord, err := actors.Start(ctx, actors.Config{Store: store, Logger: log, Placed: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	rep := NewRunner(cli, node, log, newFront("a", log, assign.Config{}, 0, nil))
	rep.keys = store
	before := goleak.IgnoreCurrent()
	if err := rep.Place(ctx, coord, store, metrics.New()); err != nil {
		t.Fatal(err)
	}
	if err := rep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left running after the replica closed: %v", err)
	}
}
