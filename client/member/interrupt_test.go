package member

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/client/redistest"
)

// interruptShards is how many shards each case reads: on a cluster they
// live on more than one node, so each stop must reach the right node.
const interruptShards = 4

// longBlock is WithBlock in the interruption tests: far longer than a stop
// may take.
const longBlock = 5 * time.Second

// TestOwnershipEndInterruptsBlockingRead: when a shard's ownership ends
// while its read loop sits in XREADGROUP … BLOCK, the run ends at once,
// not when the block runs out: the member actor stops the shard actor
// (stopRun) on a revocation and on a leave (both stop the run gracefully,
// revokeSet), on a fence, on a lapsed lease and on an abandoned drain, and
// the shard actor's stop interrupts the read (CLIENT UNBLOCK). The read
// really ended: a record written after the stop is not taken into the
// member's pending list.
func TestOwnershipEndInterruptsBlockingRead(t *testing.T) {
	srv := redistest.Standalone(t)
	cl := redistest.NewCluster(t, redistest.WithAnnouncedPorts())
	clusterNAT, err := redisconn.Open(strings.Join(cl.Addrs, ","), redisconn.Config{NATMap: cl.NATMap()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clusterNAT.Close() })
	clients := []struct {
		name string
		rdb  redis.UniversalClient
	}{
		{"standalone", srv.Client()},
		{"cluster", cl.Client()},
		{"cluster behind NAT", clusterNAT},
	}
	ends := []struct {
		name string
		end  func(tc *testCore, run *shardRun)
	}{
		{"revoked or left", func(_ *testCore, run *shardRun) { run.beginStop() }},
		{"fenced", func(_ *testCore, run *shardRun) { run.fence(ErrFenced) }},
		{"lease lapsed", func(tc *testCore, run *shardRun) { tc.lease.drop(); run.fence(ErrLeaseExpired) }},
		{"drain abandoned", func(_ *testCore, run *shardRun) { run.beginStop(); run.fence(ErrRevoked) }},
	}
	for _, c := range clients {
		for _, e := range ends {
			t.Run(c.name+"/"+e.name, func(t *testing.T) {
				ctx := context.Background()
				stream := "intr-" + strings.NewReplacer(" ", "-", "/", "-").Replace(c.name+"-"+e.name)
				if err := redistest.CreateShards(ctx, c.rdb, stream, interruptShards, "g"); err != nil {
					t.Fatal(err)
				}
				tc := newTestCore(t, 1)
				tc.rdb = c.rdb
				tc.cfg = &config{stream: stream, group: "g", block: longBlock, batch: 10,
					claimMinIdle: time.Hour, redisFailureLimit: 3}
				system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return tc.log }))
				t.Cleanup(system.Shutdown)
				runs := make([]*shardRun, interruptShards)
				pids := make([]*actor.PID, interruptShards)
				for s := range runs {
					run := newShardRun(tc.memberCore, s, 1)
					runs[s] = run
					pids[s] = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &shardActor{run: run} }))
				}
				waitBlocked(t, c.rdb, interruptShards)
				type held struct {
					node *redis.Client
					id   int64
				}
				conns := make([]held, len(runs))
				for s, run := range runs {
					run.conn.mu.Lock()
					conns[s] = held{run.conn.target, run.conn.id}
					run.conn.mu.Unlock()
				}

				start := time.Now()
				futures := make([]*actor.Future, len(pids))
				for s, run := range runs {
					e.end(tc, run)
					futures[s] = system.Root.StopFuture(pids[s])
				}
				for _, f := range futures {
					if err := f.Wait(); err != nil {
						t.Fatalf("shard actor did not stop: %v", err)
					}
				}
				took := time.Since(start)
				t.Logf("%d blocked reads (BLOCK %v) ended %v after the stop", interruptShards, longBlock, took)
				if took >= time.Second {
					t.Fatalf("the runs ended %v after the stop; want well under the block %v", took, longBlock)
				}

				// No connection is left behind: each run's read connection
				// is closed (Redis may see the close a moment later).
				for _, h := range conns {
					waitUntil(t, 10*time.Second, func() bool {
						list, err := h.node.ClientList(ctx).Result()
						if err != nil {
							t.Fatal(err)
						}
						return !strings.Contains(list, "id="+strconv.FormatInt(h.id, 10)+" ")
					}, fmt.Sprintf("read connection %d to close after its run ended", h.id))
				}
				for _, run := range runs {
					if err := c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: run.key, Values: []any{"f", "v"}}).Err(); err != nil {
						t.Fatal(err)
					}
				}
				// A read still blocked would take the records now: none
				// may over the whole window.
				never(t, 200*time.Millisecond, func() bool {
					for _, run := range runs {
						p, err := c.rdb.XPending(ctx, run.key, "g").Result()
						if err != nil {
							t.Fatal(err)
						}
						if p.Count != 0 {
							return true
						}
					}
					return false
				}, "a read after the stop taking records written after it")
				for _, run := range runs {
					p, err := c.rdb.XPending(ctx, run.key, "g").Result()
					if err != nil {
						t.Fatal(err)
					}
					if p.Count != 0 {
						t.Fatalf("%s: %d records written after the stop were read into %v", run.key, p.Count, p.Consumers)
					}
				}
			})
		}
	}
}

// waitBlocked waits until n clients of the Redis behind rdb (of every
// master, for a cluster) sit in a blocking XREADGROUP.
func waitBlocked(t *testing.T, rdb redis.UniversalClient, n int) {
	t.Helper()
	ctx := context.Background()
	var blocked int
	if !pollUntil(20*time.Second, func() bool {
		blocked = 0
		count := func(ctx context.Context, c *redis.Client) error {
			list, err := c.ClientList(ctx).Result()
			if err != nil {
				return err
			}
			for _, line := range strings.Split(list, "\n") {
				if strings.Contains(line, "cmd=xreadgroup") && strings.Contains(line, " flags=b") {
					blocked++
				}
			}
			return nil
		}
		var err error
		switch c := rdb.(type) {
		case *redis.ClusterClient:
			// ForEachMaster calls concurrently; count is not safe for it.
			var mu sync.Mutex
			var masters []*redis.Client
			err = c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
				mu.Lock()
				masters = append(masters, m)
				mu.Unlock()
				return nil
			})
			for _, m := range masters {
				if err == nil {
					err = count(ctx, m)
				}
			}
		case *redis.Client:
			err = count(ctx, c)
		}
		if err != nil {
			t.Fatal(err)
		}
		return blocked == n
	}) {
		t.Fatalf("%d reads blocked after 20s, want %d", blocked, n)
	}
}
