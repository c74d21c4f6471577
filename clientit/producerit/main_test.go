package producerit_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/leakcheck"
)

// The Redis servers are shared by every test of the package (a cluster
// takes seconds to form); each test uses its own stream prefix.
var shared sharedRedis

type sharedRedis struct {
	mu         sync.Mutex
	dirs       []string
	standalone *redistest.Server
	cluster    *redistest.Cluster
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop shared redis:", err)
		code = 1
	}
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func (s *sharedRedis) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.cluster != nil {
		err = s.cluster.Stop()
	}
	if s.standalone != nil {
		if e := s.standalone.Stop(); e != nil && err == nil {
			err = e
		}
	}
	for _, d := range s.dirs {
		os.RemoveAll(d)
	}
	return err
}

func (s *sharedRedis) dir(t testing.TB) string {
	d, err := os.MkdirTemp("", "producer-redis-")
	if err != nil {
		t.Fatal(err)
	}
	s.dirs = append(s.dirs, d)
	return d
}

// standaloneClient is a client of the shared standalone server, closed at
// the end of the test.
func standaloneClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	redistest.Require(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.standalone == nil {
		s, err := redistest.StartServer(context.Background(), shared.dir(t))
		if err != nil {
			t.Fatal(err)
		}
		shared.standalone = s
	}
	c := redis.NewClient(&redis.Options{Addr: shared.standalone.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterClient is a client of the shared cluster, closed at the end of the
// test.
func clusterClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	redistest.Require(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil {
		c, err := redistest.StartCluster(context.Background(), shared.dir(t))
		if err != nil {
			t.Fatal(err)
		}
		shared.cluster = c
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: shared.cluster.Addrs})
	t.Cleanup(func() { c.Close() })
	return c
}

// backends are the Redis deployments every data-plane test runs against.
var backends = []struct {
	name   string
	client func(testing.TB) redis.UniversalClient
}{
	{"standalone", standaloneClient},
	{"cluster", clusterClient},
}

// prefixFor is a stream prefix unique to the test.
func prefixFor(t testing.TB) string {
	r := strings.NewReplacer("/", ".", " ", "_", "#", "_")
	return r.Replace(t.Name())
}

// fixture is a coordinator with one stream whose shard streams exist in
// Redis, as a coordinator with Redis configured would have left them.
type fixture struct {
	coord  *coordtest.Server
	rdb    redis.UniversalClient
	prefix string
}

func newFixture(t *testing.T, rdb redis.UniversalClient, shards int) *fixture {
	t.Helper()
	f := &fixture{
		coord:  coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true}),
		rdb:    rdb,
		prefix: prefixFor(t),
	}
	f.coord.CreateStream(f.prefix, shards)
	// The Redis servers outlive the test (and repeat with -count): start
	// from empty shard streams.
	for i := range max(shards, 16) {
		if err := rdb.Del(context.Background(), protocol.StreamKey(f.prefix, i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := redistest.CreateShards(context.Background(), rdb, f.prefix, shards, f.prefix); err != nil {
		t.Fatal(err)
	}
	return f
}

// producer builds and starts a producer on the fixture, closed at the end of
// the test.
func (f *fixture) producer(t *testing.T, opts ...producer.Opt) *producer.Producer {
	t.Helper()
	base := []producer.Opt{
		producer.WithCoordinator(f.coord.URL),
		producer.WithStream(f.prefix),
		producer.WithRedis(f.rdb),
	}
	p, err := producer.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// scale scales the stream and returns the migration id.
func (f *fixture) scale(t *testing.T, to int) string {
	t.Helper()
	var resp protocol.ScaleResponse
	f.coord.JSON(http.MethodPost, protocol.BasePath+"/streams/"+f.prefix+"/scale",
		protocol.ScaleRequest{TargetShardCount: &to, RequestedBy: "t", Reason: "r"}, http.StatusAccepted, &resp)
	if len(resp.Migrations) == 0 {
		t.Fatalf("scale to %d answered no migration", to)
	}
	return resp.Migrations[0].ReshardingID
}

// complete retires the removed shards of migration id.
func (f *fixture) complete(t *testing.T, id string) {
	t.Helper()
	f.coord.JSON(http.MethodPost, protocol.BasePath+"/streams/"+f.prefix+"/migrations/"+id+"/complete",
		protocol.OperatorRequest{RequestedBy: "t", Reason: "r"}, http.StatusAccepted, nil)
}

// totalLen is the sum of XLEN over shards 0..n-1.
func (f *fixture) totalLen(t *testing.T, n int) int64 {
	t.Helper()
	var sum int64
	for i := range n {
		l, err := f.rdb.XLen(context.Background(), protocol.StreamKey(f.prefix, i)).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		sum += l
	}
	return sum
}

// keyRoutedTo finds a partition key routed to shard among count shards.
func keyRoutedTo(t *testing.T, shard, count int) string {
	t.Helper()
	for i := range 10000 {
		k := fmt.Sprintf("key-%d", i)
		if protocol.Route(k, count) == shard {
			return k
		}
	}
	t.Fatalf("no key routed to shard %d of %d", shard, count)
	return ""
}

// entry reads the one entry id of key, failing if it is missing.
func entry(t *testing.T, rdb redis.UniversalClient, key, id string) redis.XMessage {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), key, id, id).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("XRANGE %s %s %s = %v, want the published entry", key, id, id, msgs)
	}
	return msgs[0]
}
