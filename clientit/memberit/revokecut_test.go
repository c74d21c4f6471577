package memberit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestRevocationCutsTheBlockingReadShort: member a reads two idle shards,
// each with a blocking read of 8 s under way, when b joins and the
// coordinator moves one shard to b. a's read of that shard is cut short
// (CLIENT UNBLOCK), so a reports it revoked and b reads it within round
// trips, not when a's BLOCK would have ended. On a standalone Redis and on a
// 3-master cluster, whose blocking reads run on the key's node.
func TestRevocationCutsTheBlockingReadShort(t *testing.T) {
	const (
		block = 8 * time.Second
		lease = 10 * time.Second // above the block, as WithBlock requires
		// within: a's answer, its UNBLOCK and REVOKED report, and b's
		// next heartbeat, with room for a loaded machine; far below block.
		within = 2 * time.Second
	)
	tests := []struct {
		name string
		rdb  func(t *testing.T, reads *readLog) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T, reads *readLog) redis.UniversalClient {
			rdb := redistest.Standalone(t).Client()
			rdb.AddHook(reads)
			return rdb
		}},
		{"cluster", func(t *testing.T, reads *readLog) redis.UniversalClient {
			rdb := redistest.NewCluster(t).Client()
			t.Cleanup(func() { _ = rdb.Close() })
			// The shard's reads go on its node's own connection: hook the
			// node clients, as they are made.
			rdb.OnNewNode(func(c *redis.Client) { c.AddHook(reads) })
			return rdb
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reads := &readLog{}
			rdb := tc.rdb(t, reads)
			cfg := testGroupConfig()
			cfg.MemberLease = lease
			coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: cfg})
			coord.CreateStream("revokecut", 2)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := redistest.CreateShards(ctx, rdb, "revokecut", 2, "revokecut"); err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, coord: coord, rdb: rdb, prefix: "revokecut", shards: 2}
			ack := func(ctx context.Context, m *member.Message) error { return m.Ack(ctx) }
			aAssigned := make(chan []int, 8)
			e.start("rs-a", ack, member.WithMemberLease(lease), member.WithBlock(block),
				member.WithOnAssigned(func(ctx context.Context, shards []int) { aAssigned <- shards }))
			select {
			case <-aAssigned:
			case <-time.After(10 * time.Second):
				t.Fatal("a was never assigned its shards")
			}
			// Both of a's shards sit in a blocking read that has just begun.
			eventually(t, 10*time.Second, "a blocking read on each of a's shards", func() bool {
				return reads.blockingCount("rs-a-m0") == 2
			})

			joined := time.Now()
			bAssigned := make(chan time.Duration, 8)
			e.start("rs-b", ack, member.WithMemberLease(lease), member.WithBlock(block),
				member.WithOnAssigned(func(ctx context.Context, shards []int) {
					if len(shards) > 0 {
						bAssigned <- time.Since(joined)
					}
				}))
			select {
			case took := <-bAssigned:
				t.Logf("b read its shard %v after its start (a's reads block for %v)", took, block)
				if took > within {
					t.Fatalf("b got its shard %v after its start: a's blocking read was not cut short (block %v)", took, block)
				}
			case <-time.After(block + 5*time.Second):
				t.Fatal("b never got a shard")
			}
		})
	}
}
