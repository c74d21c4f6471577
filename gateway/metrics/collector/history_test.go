package collector_test

import (
	"context"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
)

func shardsOf(prefix, group string, states ...protocol.ShardState) protocol.ShardsResponse {
	for i := range states {
		states[i].ShardIndex = i
		states[i].Exists = true
	}
	return protocol.ShardsResponse{StreamPrefix: prefix, ConsumerGroup: group, ShardCount: len(states), Shards: states}
}

func of[T any](v T) *T { return &v }

func TestHistoryKeepsTheLastWindowOldestFirst(t *testing.T) {
	t.Parallel()
	h := collector.NewHistory(time.Second, 3*time.Second) // three samples a series
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := range 5 {
		h.Record(t0.Add(time.Duration(i)*time.Second), shardsOf("orders", "g", protocol.ShardState{Length: int64(10 * i), Lag: of[int64](0)}))
	}
	got := h.Group("orders", "g")
	if got.IntervalMs != 1000 || got.WindowMs != 3000 || !got.Tracked {
		t.Fatalf("header %+v", got)
	}
	if len(got.Group) != 3 || len(got.Shards) != 1 || len(got.Shards[0].Samples) != 3 {
		t.Fatalf("want three samples of the group and of its one shard: %+v", got)
	}
	for i, s := range got.Shards[0].Samples {
		if want := t0.Add(time.Duration(i+2) * time.Second); !s.At.Equal(want) || s.Length != int64(10*(i+2)) {
			t.Errorf("sample %d: %+v, want at %v length %d", i, s, want, 10*(i+2))
		}
	}
}

// TestHistoryDerivesRates pins the appends and acknowledgements per second
// between two samples, and when they are unknown.
func TestHistoryDerivesRates(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name          string
		prev, cur     protocol.ShardState
		after         time.Duration
		appends, acks *float64
	}{
		// 20 added in 2 s; lag rose by 4, pending by 6: 10 acknowledged.
		{"steady", protocol.ShardState{Length: 100, Pending: 2, Lag: of[int64](1)},
			protocol.ShardState{Length: 120, Pending: 8, Lag: of[int64](5)}, 2 * time.Second, of(10.0), of(5.0)},
		{"trimmed", protocol.ShardState{Length: 100, Lag: of[int64](0)},
			protocol.ShardState{Length: 90, Lag: of[int64](0)}, 2 * time.Second, nil, nil},
		{"lag unknown", protocol.ShardState{Length: 100},
			protocol.ShardState{Length: 110}, 2 * time.Second, of(5.0), nil},
		{"a gap of rounds", protocol.ShardState{Length: 100, Lag: of[int64](0)},
			protocol.ShardState{Length: 110, Lag: of[int64](0)}, 10 * time.Second, nil, nil},
		{"group reset: more pending than delivered", protocol.ShardState{Length: 100, Lag: of[int64](50)},
			protocol.ShardState{Length: 100, Pending: 80, Lag: of[int64](0)}, 2 * time.Second, of(0.0), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := collector.NewHistory(2*time.Second, time.Minute)
			h.Record(t0, shardsOf("s", "g", tc.prev))
			h.Record(t0.Add(tc.after), shardsOf("s", "g", tc.cur))
			got := h.Group("s", "g")
			first, last := got.Shards[0].Samples[0], got.Shards[0].Samples[1]
			if first.AppendsPerSecond != nil || first.AcksPerSecond != nil {
				t.Errorf("first sample has rates: %+v", first)
			}
			if !equal(last.AppendsPerSecond, tc.appends) || !equal(last.AcksPerSecond, tc.acks) {
				t.Errorf("appends %v acks %v, want %v %v", show(last.AppendsPerSecond), show(last.AcksPerSecond), show(tc.appends), show(tc.acks))
			}
			if !equal(got.Group[1].AppendsPerSecond, tc.appends) || !equal(got.Group[1].AcksPerSecond, tc.acks) {
				t.Errorf("one shard's group totals differ from it: %+v", got.Group[1])
			}
		})
	}
}

func TestHistorySumsShardsIntoTheGroup(t *testing.T) {
	t.Parallel()
	h := collector.NewHistory(time.Second, time.Minute)
	t0 := time.UnixMilli(1_700_000_000_000)
	h.Record(t0, shardsOf("s", "g", protocol.ShardState{Length: 5, Pending: 1, Lag: of[int64](2)}, protocol.ShardState{Length: 7, Pending: 3, Lag: of[int64](4)}))
	h.Record(t0.Add(time.Second), shardsOf("s", "g", protocol.ShardState{Length: 5, Pending: 1, Lag: of[int64](2)}, protocol.ShardState{Length: 9}))
	got := h.Group("s", "g").Group
	if got[0].Length != 12 || got[0].Pending != 4 || *got[0].Lag != 6 {
		t.Errorf("totals %+v", got[0])
	}
	// One shard's lag unknown: the group's is unknown, not a smaller sum.
	if got[1].Lag != nil || got[1].AcksPerSecond != nil || *got[1].AppendsPerSecond != 2 {
		t.Errorf("totals with one lag unknown %+v", got[1])
	}
}

// TestHistoryIsBounded fills the history past its bound on series: a group
// beyond it is answered untracked, short of shards, and a group deleted
// (absent from a round's listing) frees its series for them.
func TestHistoryIsBounded(t *testing.T) {
	t.Parallel()
	h := collector.NewHistory(time.Second, collector.DefaultHistoryWindow)
	if want := collector.HistorySampleBudget / collector.MaxHistorySamples; h.MaxSeries() != want {
		t.Fatalf("max series %d, want %d", h.MaxSeries(), want)
	}
	// Each group is one series of totals and three of shards.
	three := func(group string) protocol.ShardsResponse {
		return shardsOf("s", group, protocol.ShardState{}, protocol.ShardState{}, protocol.ShardState{})
	}
	fit := h.MaxSeries() / 4
	var listed []protocol.GroupResponse
	at := time.Now()
	for i := range fit + 1 {
		g := "g" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		h.Record(at, three(g))
		listed = append(listed, protocol.GroupResponse{StreamPrefix: "s", ConsumerGroup: g})
	}
	last := listed[fit].ConsumerGroup
	if got := h.Group("s", last); len(got.Shards) == 3 || got.Tracked {
		t.Fatalf("a group past the bound: %+v", got)
	}
	if got := h.Group("s", listed[0].ConsumerGroup); !got.Tracked || len(got.Shards) != 3 {
		t.Fatalf("a group within the bound: %+v", got)
	}
	h.Retain(listed[1:])
	h.Record(at, three(last))
	if got := h.Group("s", last); !got.Tracked || len(got.Shards) != 3 {
		t.Fatalf("after a deletion freed room: %+v", got)
	}
	if got := h.Group("s", listed[0].ConsumerGroup); len(got.Group) != 0 {
		t.Fatalf("a deleted group keeps its history: %+v", got)
	}
}

// TestRoundRecordsHistory: a collection round feeds the history with the
// groups it read, and forgets the groups no longer listed.
func TestRoundRecordsHistory(t *testing.T) {
	t.Parallel()
	src := &source{redis: protocol.HealthUp,
		groups: []protocol.GroupResponse{{StreamPrefix: "orders", ConsumerGroup: "a"}},
		shards: map[string]protocol.ShardsResponse{"a": shardsOf("orders", "a", protocol.ShardState{Length: 3, Lag: of[int64](1)})}}
	h := collector.NewHistory(time.Second, time.Minute)
	cfg := collector.Config{Source: src, Sink: &sink{}, Interval: time.Second, Timeout: time.Second, History: h}
	collector.Round(context.Background(), cfg)
	if got := h.Group("orders", "a"); len(got.Shards) != 1 || got.Shards[0].Samples[0].Length != 3 {
		t.Fatalf("after a round: %+v", got)
	}
	src.groups = nil
	collector.Round(context.Background(), cfg)
	if got := h.Group("orders", "a"); len(got.Group) != 0 {
		t.Fatalf("a group no longer listed keeps its history: %+v", got)
	}
}

func equal(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(v *float64) any {
	if v == nil {
		return "null"
	}
	return *v
}

// TestHistoryForgetsRetiredShards: a shard no longer read (retired after a
// scale-in) leaves the history; the others keep their samples.
func TestHistoryForgetsRetiredShards(t *testing.T) {
	t.Parallel()
	h := collector.NewHistory(time.Second, time.Minute)
	t0 := time.UnixMilli(1_700_000_000_000)
	h.Record(t0, shardsOf("s", "g", protocol.ShardState{Length: 1}, protocol.ShardState{Length: 2}, protocol.ShardState{Length: 3}))
	h.Record(t0.Add(time.Second), shardsOf("s", "g", protocol.ShardState{Length: 1}, protocol.ShardState{Length: 2}))
	got := h.Group("s", "g")
	if len(got.Shards) != 2 || len(got.Shards[1].Samples) != 2 || got.Group[1].Length != 3 {
		t.Fatalf("after shard 2 retired: %+v", got)
	}
}
