package collector_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
	"github.com/rscoord/rscoord/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// source is a scripted coordinator.
type source struct {
	redis  string
	groups []protocol.GroupResponse
	shards map[string]protocol.ShardsResponse // by group
	block  bool                               // Shards waits for ctx, as a hung Redis would
}

func (s *source) Health(context.Context) protocol.Health {
	return protocol.Health{RedisDetail: protocol.ComponentHealth{Status: s.redis}}
}
func (s *source) Groups(context.Context) (protocol.GroupsResponse, error) {
	return protocol.GroupsResponse{Groups: s.groups}, nil
}
func (s *source) Shards(ctx context.Context, _, group string) (protocol.ShardsResponse, error) {
	if s.block {
		<-ctx.Done()
		return protocol.ShardsResponse{}, ctx.Err()
	}
	sh, ok := s.shards[group]
	if !ok {
		return sh, errors.New("no such group")
	}
	return sh, nil
}

// memory is a scripted Redis memory reader: bytes by key.
type memory struct {
	bytes map[string]int64
	calls [][]string
}

func (m *memory) MemoryUsage(_ context.Context, keys []string) ([]int64, error) {
	m.calls = append(m.calls, keys)
	out := make([]int64, len(keys))
	for i, k := range keys {
		b, ok := m.bytes[k]
		if !ok {
			b = -1
		}
		out[i] = b
	}
	return out, nil
}

// sink records the last round.
type sink struct {
	mu     sync.Mutex
	rounds int
	stats  []metrics.ShardStat
	mems   []metrics.ShardMemory
	up     *bool
	failed int
	took   time.Duration
}

func (k *sink) SetShardStats(s []metrics.ShardStat) { k.mu.Lock(); k.stats = s; k.mu.Unlock() }
func (k *sink) SetShardMemory(m []metrics.ShardMemory) {
	k.mu.Lock()
	k.mems = m
	k.mu.Unlock()
}
func (k *sink) CollectionDone(up *bool, took time.Duration, failed int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rounds++
	k.up, k.took, k.failed = up, took, failed
}

func TestRound(t *testing.T) {
	lag := int64(25)
	g := func(name string) protocol.GroupResponse {
		return protocol.GroupResponse{StreamPrefix: "prod", ConsumerGroup: name}
	}
	shards := protocol.ShardsResponse{StreamPrefix: "prod", ConsumerGroup: "a", Shards: []protocol.ShardState{
		{ShardIndex: 0, Exists: true, Length: 25, Lag: &lag},
		{ShardIndex: 1, Exists: true, Length: 3, Pending: 2}, // lag unknown
		{ShardIndex: 2, Exists: false},                       // key missing
	}}
	cases := []struct {
		name       string
		src        *source
		wantUp     *bool
		wantStats  int
		wantLag    []int // shard indexes with a lag
		wantFailed int
	}{
		{name: "redis up", src: &source{redis: protocol.HealthUp, groups: []protocol.GroupResponse{g("a")},
			shards: map[string]protocol.ShardsResponse{"a": shards}},
			wantUp: ptr(true), wantStats: 3, wantLag: []int{0}},
		{name: "redis down: no shard series", src: &source{redis: protocol.HealthDown, groups: []protocol.GroupResponse{g("a")},
			shards: map[string]protocol.ShardsResponse{"a": shards}},
			wantUp: ptr(false), wantStats: 0},
		{name: "no redis", src: &source{redis: protocol.HealthNotConfigured, groups: []protocol.GroupResponse{g("a")}}, wantStats: 0},
		{name: "one group fails", src: &source{redis: protocol.HealthUp, groups: []protocol.GroupResponse{g("a"), g("gone")},
			shards: map[string]protocol.ShardsResponse{"a": shards}},
			wantUp: ptr(true), wantStats: 3, wantLag: []int{0}, wantFailed: 1},
		{name: "hung redis: bounded round", src: &source{redis: protocol.HealthUp, groups: []protocol.GroupResponse{g("a")}, block: true}, wantUp: ptr(true), wantStats: 0, wantFailed: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := &sink{}
			start := time.Now()
			collector.Round(context.Background(), collector.Config{Source: c.src, Sink: k, Interval: time.Second, Timeout: 100 * time.Millisecond})
			if took := time.Since(start); took > time.Second {
				t.Errorf("round took %v, bound 100ms", took)
			}
			if (k.up == nil) != (c.wantUp == nil) || (k.up != nil && *k.up != *c.wantUp) {
				t.Errorf("redis up %v, want %v", deref(k.up), deref(c.wantUp))
			}
			if len(k.stats) != c.wantStats {
				t.Errorf("%d shard stats, want %d: %+v", len(k.stats), c.wantStats, k.stats)
			}
			var lags []int
			for _, s := range k.stats {
				if s.Lag != nil {
					lags = append(lags, s.Shard)
				}
				if s.Shard == 2 && s.Pending != nil {
					t.Errorf("missing key has a pending count")
				}
			}
			if !slices.Equal(lags, c.wantLag) {
				t.Errorf("lag on shards %v, want %v", lags, c.wantLag)
			}
			if k.failed != c.wantFailed {
				t.Errorf("failed %d, want %d", k.failed, c.wantFailed)
			}
		})
	}
}

// TestRoundReadsShardMemory: every existing shard key is read once a
// round, however many groups read it; a missing key and a key Redis no
// longer has get no series.
func TestRoundReadsShardMemory(t *testing.T) {
	shards := func(group string) protocol.ShardsResponse {
		return protocol.ShardsResponse{StreamPrefix: "prod", ConsumerGroup: group, Shards: []protocol.ShardState{
			{ShardIndex: 0, Exists: true, Length: 25},
			{ShardIndex: 1, Exists: true, Length: 3}, // deleted before MEMORY USAGE
			{ShardIndex: 2, Exists: false},
		}}
	}
	src := &source{redis: protocol.HealthUp,
		groups: []protocol.GroupResponse{{StreamPrefix: "prod", ConsumerGroup: "a"}, {StreamPrefix: "prod", ConsumerGroup: "b"}},
		shards: map[string]protocol.ShardsResponse{"a": shards("a"), "b": shards("b")}}
	mem := &memory{bytes: map[string]int64{"prod:0": 4096, "prod:2": 1}}
	k := &sink{}
	collector.Round(context.Background(), collector.Config{Source: src, Sink: k, Memory: mem, Interval: time.Second, Timeout: time.Second})
	if want := [][]string{{"prod:0", "prod:1"}}; !slices.EqualFunc(mem.calls, want, slices.Equal) {
		t.Errorf("MEMORY USAGE of %v, want %v", mem.calls, want)
	}
	if want := []metrics.ShardMemory{{Stream: "prod", Shard: 0, Bytes: 4096}}; !slices.Equal(k.mems, want) {
		t.Errorf("memory %+v, want %+v", k.mems, want)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	k := &sink{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- collector.Run(ctx, collector.Config{Source: &source{redis: protocol.HealthNotConfigured}, Sink: k,
			Interval: 10 * time.Millisecond, Timeout: 10 * time.Millisecond})
	}()
	var n int
	if !poll.Soon(10*time.Second, func() bool {
		k.mu.Lock()
		n = k.rounds
		k.mu.Unlock()
		return n >= 3
	}) {
		t.Fatalf("only %d rounds in 10s at a 10ms interval", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := collector.Run(context.Background(), collector.Config{Source: &source{}, Sink: k, Interval: time.Second, Timeout: 2 * time.Second}); err == nil {
		t.Fatal("a timeout beyond the interval must be refused")
	}
}

func ptr(b bool) *bool { return &b }

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// TestRedisMemoryReadsARealRedis: MEMORY USAGE through go-redis answers a
// stream's bytes, -1 for a missing key, and an error once the round's
// time is up.
func TestRedisMemoryReadsARealRedis(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	for i := range 100 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "prod:0", Values: []any{"n", i, "pad", strings.Repeat("x", 100)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	mem := collector.RedisMemory(rdb)
	got, err := mem.MemoryUsage(ctx, []string{"prod:0", "prod:1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] < 100*100 || got[1] != -1 {
		t.Errorf("MEMORY USAGE of prod:0 (100 entries of 100 bytes) and a missing key: %v", got)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := mem.MemoryUsage(done, []string{"prod:0"}); err == nil {
		t.Error("a round whose time is up read memory anyway")
	}
}
