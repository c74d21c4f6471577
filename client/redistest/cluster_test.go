package redistest_test

import (
	"context"
	"github.com/redis/go-redis/v9"
	"strconv"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

func TestSlotRangesCoverEverySlotOnce(t *testing.T) {
	want := []redistest.SlotRange{{0, 5460}, {5461, 10922}, {10923, 16383}}
	got := redistest.SlotRanges()
	if len(got) != len(want) {
		t.Fatalf("SlotRanges = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("SlotRanges = %v, want %v", got, want)
		}
	}
}

func TestClusterSpreadsShardKeysOverAllMasters(t *testing.T) {
	cl := redistest.NewCluster(t)
	if len(cl.Nodes) != 3 || len(cl.Addrs) != 3 {
		t.Fatalf("cluster has %d nodes, %d addrs; want 3", len(cl.Nodes), len(cl.Addrs))
	}
	ctx := context.Background()
	c := cl.Client()
	if err := redistest.CreateShards(ctx, c, "orders", 16, "orders"); err != nil {
		t.Fatal(err)
	}
	perNode := make([]int, len(cl.Nodes))
	for i := range 16 {
		key := protocol.StreamKey("orders", i)
		slot := protocol.RedisSlot(key)
		// Redis agrees with our slot function.
		got, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil || int(got) != slot {
			t.Fatalf("CLUSTER KEYSLOT %s = %d, %v; want %d", key, got, err, slot)
		}
		node := cl.NodeForSlot(slot)
		perNode[node]++
		// The key lives on exactly the node serving its slot.
		for j, s := range cl.Nodes {
			direct := s.Client()
			n, err := direct.Exists(ctx, key).Result()
			direct.Close()
			if err != nil {
				// A node not serving the slot answers MOVED.
				if j == node {
					t.Fatalf("EXISTS %s on its own node %s: %v", key, s.Addr, err)
				}
				continue
			}
			if (n == 1) != (j == node) {
				t.Fatalf("EXISTS %s on node %d = %d; want the key only on node %d", key, j, n, node)
			}
		}
		if err := c.XAdd(ctx, xadd(key, i)).Err(); err != nil {
			t.Fatalf("XADD %s: %v", key, err)
		}
	}
	for i, n := range perNode {
		if n == 0 {
			t.Fatalf("no key of orders:0..15 on master %d (%s): per node %v", i, cl.Addrs[i], perNode)
		}
	}
	t.Logf("orders:0..15 per master: %v", perNode)
}

func TestClusterNodeRestartRejoins(t *testing.T) {
	cl := redistest.NewCluster(t)
	ctx := context.Background()
	c := cl.Client()
	addr := cl.Nodes[1].Addr
	if err := cl.Nodes[1].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if cl.Nodes[1].Addr != addr {
		t.Fatalf("restarted node moved from %s to %s", addr, cl.Nodes[1].Addr)
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		key := "k" + strconv.Itoa(i)
		if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s after restart: %v", key, err)
		}
	}
}

func xadd(key string, i int) *redis.XAddArgs {
	return &redis.XAddArgs{Stream: key, NoMkStream: true, Values: []any{"i", i}}
}
