package memberit_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/member/memberprom"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestCollectorExportsARunningMember scrapes the collector of a member
// that read and acknowledged records on real Redis and the real
// coordinator.
func TestCollectorExportsARunningMember(t *testing.T) {
	rdb := redistest.Standalone(t).Client()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: assign.Config{
		HeartbeatInterval: 200 * time.Millisecond, ReconcileInterval: 50 * time.Millisecond, MemberLease: 2 * time.Second,
	}})
	coord.CreateStream("prom", 2)
	ctx := context.Background()
	if err := redistest.CreateShards(ctx, rdb, "prom", 2, "prom"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "prom:1", Values: map[string]any{"a": "b"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := member.New(func(ctx context.Context, m *member.Message) error { return m.Ack(ctx) },
		member.WithCoordinator(coord.URL), member.WithStream("prom"), member.WithRedis(rdb), member.WithBaseID("p"),
		member.WithMemberLease(2*time.Second), member.WithBlock(100*time.Millisecond),
		member.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(memberprom.New(rt))
	if v := testutil.ToFloat64(metric(t, reg, "rscoord_member_ready")); v != 0 {
		t.Fatalf("ready before Run: %v", v)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if !poll.Wait(10*time.Second, 20*time.Millisecond, func() bool {
		err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP rscoord_member_records_acked_total Records acknowledged (Ack, AckDel).
# TYPE rscoord_member_records_acked_total counter
rscoord_member_records_acked_total{group="prom",member="p-m0",shard="0",stream="prom"} 0
rscoord_member_records_acked_total{group="prom",member="p-m0",shard="1",stream="prom"} 3
# HELP rscoord_member_ready 1 while every logical member of the runtime is ACTIVE (joined, lease valid, Redis working).
# TYPE rscoord_member_ready gauge
rscoord_member_ready{group="prom",stream="prom"} 1
`), "rscoord_member_records_acked_total", "rscoord_member_ready")
		return err == nil
	}) {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// metric is a collector of the one metric name of reg, for ToFloat64.
func metric(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: "copy"},
				func() float64 { return mf.GetMetric()[0].GetGauge().GetValue() })
		}
	}
	t.Fatalf("no single %s in %d families", name, len(mfs))
	return nil
}
