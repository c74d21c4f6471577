package collector_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// source is a scripted coordinator.
type source struct {
	redis   string
	groups  []protocol.GroupResponse
	shards  map[string]protocol.ShardsResponse // by group
	members map[string][]protocol.Member
	block   bool // Shards waits for ctx, as a hung Redis would
}

func (s *source) Health(context.Context) protocol.Health {
	return protocol.Health{Redis: protocol.ComponentHealth{Status: s.redis}}
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
func (s *source) Members(_ context.Context, _, group string) (protocol.MembersResponse, error) {
	return protocol.MembersResponse{Members: s.members[group]}, nil
}

// sink records the last round.
type sink struct {
	mu      sync.Mutex
	rounds  int
	stats   []metrics.ShardStat
	members []metrics.MemberLiveness
	up      *bool
	failed  int
	took    time.Duration
}

func (k *sink) SetShardStats(s []metrics.ShardStat) { k.mu.Lock(); k.stats = s; k.mu.Unlock() }
func (k *sink) SetMemberLiveness(m []metrics.MemberLiveness) {
	k.mu.Lock()
	k.members = m
	k.mu.Unlock()
}
func (k *sink) CollectionDone(up *bool, took time.Duration, failed int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rounds++
	k.up, k.took, k.failed = up, took, failed
}

func TestRound(t *testing.T) {
	now := time.Now()
	lease := now.Add(10 * time.Second)
	lag := int64(25)
	g := func(name string) protocol.GroupResponse {
		return protocol.GroupResponse{StreamPrefix: "prod", ConsumerGroup: name}
	}
	shards := protocol.ShardsResponse{StreamPrefix: "prod", ConsumerGroup: "a", Shards: []protocol.ShardState{
		{ShardIndex: 0, Exists: true, Length: 25, Lag: &lag},
		{ShardIndex: 1, Exists: true, Length: 3, Pending: 2}, // lag unknown
		{ShardIndex: 2, Exists: false},                       // key missing
	}}
	members := []protocol.Member{
		{MemberID: "m1", State: protocol.MemberActive, LastHeartbeatAt: &now, MemberLeaseExpiresAt: &lease},
		{MemberID: "m2", State: protocol.MemberExpired, LastHeartbeatAt: &now, MemberLeaseExpiresAt: &lease},
		{MemberID: "m3", State: protocol.MemberStarting}, // no heartbeat recorded
	}
	cases := []struct {
		name       string
		src        *source
		wantUp     *bool
		wantStats  int
		wantLag    []int // shard indexes with a lag
		wantFailed int
	}{
		{name: "redis up", src: &source{redis: protocol.HealthUp, groups: []protocol.GroupResponse{g("a")},
			shards: map[string]protocol.ShardsResponse{"a": shards}, members: map[string][]protocol.Member{"a": members}},
			wantUp: ptr(true), wantStats: 3, wantLag: []int{0}},
		{name: "redis down: no shard series", src: &source{redis: protocol.HealthDown, groups: []protocol.GroupResponse{g("a")},
			shards: map[string]protocol.ShardsResponse{"a": shards}, members: map[string][]protocol.Member{"a": members}},
			wantUp: ptr(false), wantStats: 0},
		{name: "no redis", src: &source{redis: protocol.HealthNotConfigured, groups: []protocol.GroupResponse{g("a")},
			members: map[string][]protocol.Member{"a": members}}, wantStats: 0},
		{name: "one group fails", src: &source{redis: protocol.HealthUp, groups: []protocol.GroupResponse{g("a"), g("gone")},
			shards: map[string]protocol.ShardsResponse{"a": shards}, members: map[string][]protocol.Member{"a": members}},
			wantUp: ptr(true), wantStats: 3, wantLag: []int{0}, wantFailed: 1},
		{name: "hung redis: bounded round", src: &source{redis: protocol.HealthUp, groups: []protocol.GroupResponse{g("a")}, block: true,
			members: map[string][]protocol.Member{"a": members}}, wantUp: ptr(true), wantStats: 0, wantFailed: 1},
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
			if len(k.members) != 1 || k.members[0].Member != "m1" {
				t.Errorf("members %+v, want only the owning member with a heartbeat (m1)", k.members)
			}
			if k.failed != c.wantFailed {
				t.Errorf("failed %d, want %d", k.failed, c.wantFailed)
			}
		})
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		k.mu.Lock()
		n := k.rounds
		k.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d rounds in 5s at a 10ms interval", n)
		}
		time.Sleep(5 * time.Millisecond)
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
