package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/persistence"
)

// TestClusterEveryRefusedWriteDropsItsStream: many streams lose their
// owner keys at once while the placement loop is busy, and each gets a
// write refused by etcd. Every one of them is dropped and claimed again
// with a fresh key: none is left running on a fence that no longer
// exists, where its write-free heartbeats would still be answered OK.
func TestClusterEveryRefusedWriteDropsItsStream(t *testing.T) {
	const streams = 100 // more than any bounded queue of signals held
	etcd := etcdtest.NewCluster(t)
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	cli, err := etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	const root = "/refused/"
	seed, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{Client: cli, Prefix: root + "data/", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("s%03d", i) }
	for i := range streams {
		if _, err := seed.SaveStream(ctx, persistence.StreamRecord{StreamPrefix: name(i), ShardCount: 1, CreatedAt: time.Now()}, 0); err != nil {
			t.Fatal(err)
		}
	}
	node := joinTestNode(t, cli, root, "a")
	rep := NewRunner(cli, node, log, newFront("a", log, assign.Config{}, 0, nil))
	es, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{Client: cli, Prefix: root + "data/", Logger: log,
		Fence: StoreFence(node)})
	if err != nil {
		t.Fatal(err)
	}
	rep.keys = es
	store := &fencedStore{Store: es, refused: rep.refusedWrite}
	coord, err := actors.Start(ctx, actors.Config{Store: store, Logger: log, Placed: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rep.Close(context.Background())
		_ = coord.Close(context.Background())
		_ = es.Close()
	})
	if err := rep.Place(ctx, coord, store, metrics.New()); err != nil {
		t.Fatal(err)
	}
	// fresh reports whether stream i runs here on the fence its owner key
	// has now in etcd.
	fresh := func(i int) bool {
		if !rep.isServing(name(i)) {
			return false
		}
		f, ok := node.FenceOf(streamUnit(name(i)))
		if !ok {
			return false
		}
		resp, err := cli.Get(ctx, f.Key)
		return err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == f.CreateRevision
	}
	allFresh := func(within time.Duration) []string {
		var stale []string
		for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
			stale = stale[:0]
			for i := range streams {
				if !fresh(i) {
					stale = append(stale, name(i))
				}
			}
			if len(stale) == 0 || time.Now().After(deadline) {
				return stale
			}
		}
	}
	if stale := allFresh(30 * time.Second); len(stale) > 0 {
		t.Fatalf("streams not claimed at the start: %v", stale)
	}
	records, err := seed.LoadStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The loop waits for r.mu while every key goes and every stream has a
	// write refused: the signals pile up.
	rep.mu.Lock()
	if _, err := cli.Delete(ctx, root+"owners/", clientv3.WithPrefix()); err != nil {
		rep.mu.Unlock()
		t.Fatal(err)
	}
	for _, rec := range records {
		if _, err := store.SaveStream(ctx, rec, rec.Revision); !errors.Is(err, persistence.ErrNotOwner) {
			rep.mu.Unlock()
			t.Fatalf("write of %s after its owner key went: %v, want ErrNotOwner", rec.StreamPrefix, err)
		}
	}
	rep.mu.Unlock()
	if stale := allFresh(4 * reconcileEvery); len(stale) > 0 {
		t.Fatalf("%d streams still run on an owner key that is gone: %v", len(stale), stale)
	}
}
