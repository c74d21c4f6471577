package redisops_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/redisops"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOperationsOnStandaloneAndCluster runs every operation against real
// Redis, standalone and a 3-master cluster.
func TestOperationsOnStandaloneAndCluster(t *testing.T) {
	ctx := context.Background()
	targets := []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { return redistest.Standalone(t).Client() }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.NewCluster(t).Client() }},
	}
	for _, tc := range targets {
		t.Run(tc.name, func(t *testing.T) {
			rdb := tc.client(t)
			ops := redisops.Wrap(rdb)
			if err := ops.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			keys := []string{"orders:0", "orders:1", "orders:2"}
			for range 2 { // Provision is idempotent: BUSYGROUP is success
				if err := ops.Provision(ctx, keys, []string{"orders", "billing"}); err != nil {
					t.Fatal(err)
				}
			}
			// Every key, not only the one read below, has both groups: on
			// the cluster the keys live on different masters.
			for _, key := range keys {
				f, err := ops.Inspect(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if !f.Exists || f.Group("orders") == nil || f.Group("billing") == nil {
					t.Fatalf("%s after Provision = %+v, want the key with groups orders and billing", key, f)
				}
			}
			for i := range 5 {
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:1", Values: []any{"n", fmt.Sprint(i)}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// billing reads two and acknowledges one: pending 1, lag 3.
			res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "billing", Consumer: "c", Streams: []string{"orders:1", ">"}, Count: 2}).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.XAck(ctx, "orders:1", "billing", res[0].Messages[0].ID).Err(); err != nil {
				t.Fatal(err)
			}
			f, err := ops.Inspect(ctx, "orders:1")
			if err != nil {
				t.Fatal(err)
			}
			billing, orders := f.Group("billing"), f.Group("orders")
			if !f.Exists || f.Length != 5 || billing == nil || orders == nil || billing.Pending != 1 ||
				billing.Lag == nil || *billing.Lag != 3 || orders.Lag == nil || *orders.Lag != 5 {
				t.Fatalf("facts = %+v billing=%+v orders=%+v", f, billing, orders)
			}
			entries, err := ops.Range(ctx, "orders:1", "", 2, false)
			if err != nil || len(entries) != 2 || entries[0].Fields["n"] != "0" {
				t.Fatalf("range forward = %+v %v", entries, err)
			}
			after, err := ops.Range(ctx, "orders:1", entries[1].ID, 10, false)
			if err != nil || len(after) != 3 || after[0].Fields["n"] != "2" {
				t.Fatalf("range after %s = %+v %v", entries[1].ID, after, err)
			}
			back, err := ops.Range(ctx, "orders:1", "", 1, true)
			if err != nil || len(back) != 1 || back[0].Fields["n"] != "4" {
				t.Fatalf("range backward = %+v %v", back, err)
			}
			// SETID moves where billing stands; its pending entry stays.
			if err := ops.SetGroupID(ctx, "orders:1", "billing", "0"); err != nil {
				t.Fatal(err)
			}
			if f, err := ops.Inspect(ctx, "orders:1"); err != nil || f.Group("billing").LastDeliveredID != "0-0" || f.Group("billing").Pending != 1 {
				t.Fatalf("billing after SETID 0 = %+v %v", f.Group("billing"), err)
			}
			if err := ops.SetGroupID(ctx, "orders:1", "missing", "0"); err == nil {
				t.Fatal("SETID of a group that does not exist succeeded")
			}
			// DESTROY takes billing off every key, missing keys included,
			// and leaves orders; a repeat changes nothing.
			for range 2 {
				if err := ops.DestroyGroup(ctx, append(keys, "missing:9"), "billing"); err != nil {
					t.Fatal(err)
				}
			}
			for _, key := range keys {
				if f, err := ops.Inspect(ctx, key); err != nil || f.Group("billing") != nil || f.Group("orders") == nil {
					t.Fatalf("%s after DestroyGroup = %+v %v", key, f, err)
				}
			}
			if err := ops.Delete(ctx, "orders:1", "orders:2", "missing:9"); err != nil {
				t.Fatal(err)
			}
			// Every key named is gone (on the cluster orders:1 and orders:2
			// are on different masters), and a key not named is kept.
			for key, want := range map[string]bool{"orders:0": true, "orders:1": false, "orders:2": false} {
				f, err := ops.Inspect(ctx, key)
				if err != nil || f.Exists != want {
					t.Fatalf("%s after Delete = %+v %v, want exists %v", key, f, err, want)
				}
			}
			if empty, err := ops.Range(ctx, "orders:1", "", 10, false); err != nil || len(empty) != 0 {
				t.Fatalf("range of a missing key = %+v %v", empty, err)
			}
		})
	}
}
