package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/persistence"
)

// A group whose write the etcd store refused because the stream's owner key
// is gone (cluster mode: another replica may own the stream now) stops
// deciding: it does not reload the store and answer from there, it
// answers RETRY until the replica drops the stream. Reloading would serve
// the new owner's state, with every lease renewed by the reload, from a
// replica that owns nothing.
func TestRefusedWriteFailsTheGroupClosed(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.NewCluster(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	const ownerKey = "/owners/stream/orders"
	claimed, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", 0)).
		Then(clientv3.OpPut(ownerKey, "r1")).Commit()
	if err != nil || !claimed.Succeeded {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	rev := claimed.Header.Revision
	store, err := persistence.OpenEtcd(ctx, persistence.EtcdOptions{
		Client: cli, Prefix: "/data/", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Fence: func(string) (string, int64, bool) { return ownerKey, rev, true },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	coord := start(t, store)
	if _, err := coord.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	joined := coord.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	if joined.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", joined)
	}

	// The owner key lapses; a join needs a write, which is refused.
	if _, err := cli.Delete(ctx, ownerKey); err != nil {
		t.Fatal(err)
	}
	if resp := coord.Heartbeat(ctx, "orders", "orders", "b", join("b")); resp.Status != protocol.StatusRetry {
		t.Fatalf("join after the owner key went: %+v", resp)
	}
	// a's steady heartbeat needs no write: it must not be answered OK.
	for i := range 3 {
		req := steady("a", joined)
		req.RequestID = fmt.Sprintf("a-steady-%d", i)
		if resp := coord.Heartbeat(ctx, "orders", "orders", "a", req); resp.Status != protocol.StatusRetry {
			t.Fatalf("a's heartbeat %d after a refused write: %s, want RETRY", i, resp.Status)
		}
	}
}
