package member

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
)

// xreadNew builds a read of new entries of key by consumer "m" of group "g".
func xreadNew(ctx context.Context, key string, block time.Duration) func(redis.Pipeliner) *redis.XStreamSliceCmd {
	return func(b redis.Pipeliner) *redis.XStreamSliceCmd {
		return b.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "m", Streams: []string{key, ">"}, Count: 1, Block: block})
	}
}

// TestInterruptCatchesReadSentAfterStop: the read a loop sends after its
// stop began (it passed its context check just before the cancel) is
// still cut short, although the first UNBLOCKs found nothing to unblock:
// they go on until the loop returns.
func TestInterruptCatchesReadSentAfterStop(t *testing.T) {
	rdb := redistest.Standalone(t).Client()
	ctx := context.Background()
	const key = "late:0"
	if err := rdb.XGroupCreateMkStream(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	rc := newReadConn(rdb, key)
	// The loop has taken its connection and published its id, as a loop
	// that passed its context check just before the cancel has.
	if _, err := rc.get(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rc.interruptUntil(ctx, done)
	}()
	// The read below goes out only after the stop's first rounds found
	// nothing to unblock: Redis counts the CLIENT UNBLOCKs they sent.
	waitUntil(t, 10*time.Second, func() bool { return unblocksSent(t, rdb) >= 3 }, "three CLIENT UNBLOCK rounds")
	start := time.Now()
	res, err := sendOnce(ctx, rdb, rc, xreadNew(ctx, key, longBlock)).Result()
	took := time.Since(start)
	close(done)
	wg.Wait()
	rc.drop()
	t.Logf("a read sent after the stop began returned after %v (BLOCK %v)", took, longBlock)
	if !errors.Is(err, redis.Nil) || len(res) != 0 {
		t.Fatalf("read = %v, %v; want no entries (redis.Nil)", res, err)
	}
	if took >= time.Second {
		t.Fatalf("the read took %v; want it cut short", took)
	}
}

// TestReadConnSendsReadOnce: a read of new entries whose answer is lost on
// the read connection is not sent again, on it or over the pool (it would
// move one more entry into the consumer's pending list); the connection is
// dropped and the next read takes a new one.
func TestReadConnSendsReadOnce(t *testing.T) {
	srv := redistest.Standalone(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	const key = "once:0"
	if err := rdb.XGroupCreateMkStream(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"f", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rc := newReadConn(rdb, key)
	defer rc.drop()
	proxy.DropAnswerTo("XREADGROUP")
	if _, err := sendOnce(ctx, rdb, rc, xreadNew(ctx, key, time.Second)).Result(); err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("read whose answer was dropped = %v; want an error", err)
	}
	if proxy.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d answers, want 1", proxy.Dropped())
	}
	if rc.conn != nil {
		t.Fatal("the connection that lost an answer was kept")
	}
	p, err := rdb.XPending(ctx, key, "g").Result()
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != 1 {
		t.Fatalf("%d entries pending after one lost read of one entry; want 1 (sent once)", p.Count)
	}
	res, err := sendOnce(ctx, rdb, rc, xreadNew(ctx, key, time.Second)).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 1 || rc.conn == nil {
		t.Fatalf("next read = %v, %v (connection %v); want one entry on a new connection", res, err, rc.conn)
	}
}

// TestReadConnFollowsMovedSlot: on a cluster, a read connection to a node
// that no longer serves the key gets MOVED; the read, which that node did
// not run, goes through the cluster client once (it is read, once), the
// connection is dropped, and a connection whose node differs from the
// key's node is replaced.
func TestReadConnFollowsMovedSlot(t *testing.T) {
	cc := redistest.NewCluster(t).Client()
	ctx := context.Background()
	const key = "moved:0"
	if err := cc.XGroupCreateMkStream(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	right, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wrong *redis.Client
	if err := cc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Options().Addr != right.Options().Addr {
			wrong = m
		}
		return nil
	}); err != nil || wrong == nil {
		t.Fatalf("no other master: %v", err)
	}
	add := func() {
		t.Helper()
		if err := cc.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"f", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rc := newReadConn(cc, key)
	defer rc.drop()
	node := right
	rc.nodeFor = func(context.Context) (*redis.Client, error) { return node, nil }

	add()
	res, err := sendOnce(ctx, cc, rc, xreadNew(ctx, key, time.Second)).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 1 || rc.node != right {
		t.Fatalf("read on the key's node = %v, %v; want one entry", res, err)
	}
	held := rc.conn

	node = wrong // the slot map says the key moved
	add()
	res, err = sendOnce(ctx, cc, rc, xreadNew(ctx, key, time.Second)).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 1 {
		t.Fatalf("read after MOVED = %v, %v; want the entry, through the cluster client", res, err)
	}
	if rc.conn != nil || held == rc.conn {
		t.Fatal("kept a connection to a node that answered MOVED")
	}
	p, err := cc.XPending(ctx, key, "g").Result()
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != 2 {
		t.Fatalf("%d entries pending after two reads of one entry; want 2", p.Count)
	}
}

// unblocksSent is how many CLIENT UNBLOCK commands the server has run, from
// INFO commandstats.
func unblocksSent(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_client|unblock:calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		return n
	}
	return 0
}
