package main

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// The owner key of a stream is deleted under its replica while the
// replica's lease runs (by hand, or anything but the lease) and another
// holder claims it. The replica's member heartbeats write nothing, so no
// refused write would tell it: it must stop answering them OK from its
// own state as soon as its watch sees the key go, and take the stream
// back, loaded afresh, once the key is free again.
func TestClusterOwnerKeyDeletedUnderItsReplica(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	r1 := startReplica(t, c, "r1", freeLoopbackPort(t))
	asAdmin(t, r1.url).CreateStream("orders", 4)
	s := asMember(t, r1.url)
	a := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, s, 6, a)
	awaitOK(t, s, a, 5*time.Second)

	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	key := c.prefix + "owners/stream/orders"
	intruder, err := json.Marshal(cluster.Replica{ID: "r9", AdvertiseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	// Frozen for a moment (well within its lease) so that it cannot claim
	// the stream again between the delete and the other claim.
	if err := r1.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(intruder), clientv3.WithLease(lease.ID))).Commit()
	if err := r1.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err != nil || !resp.Succeeded {
		t.Fatalf("the other claim: %v %v", resp, err)
	}
	// The replica's watch delivers the change: its first refusal shows it.
	// From then on, no heartbeat may be answered OK over the window.
	refused := func() bool {
		hb, _, err := tryBeatHeader(s, a)
		return err != nil || hb.Status != protocol.StatusOK
	}
	poll.UntilEvery(t, 20*time.Second, 100*time.Millisecond, refused, "r1 to refuse heartbeats once another holds the owner key")
	poll.Wait(1500*time.Millisecond, 100*time.Millisecond, func() bool {
		if hb, h, err := tryBeatHeader(s, a); err == nil && hb.Status == protocol.StatusOK {
			t.Fatalf("r1 answered OK (owner %q) for a stream whose owner key another holds: %+v",
				h.Get(protocol.OwnerURLHeader), hb)
		}
		return false
	})
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	awaitOK(t, s, a, 10*time.Second)
}
