package main

import (
	"bytes"
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestMetricsShowShardLag runs the binary with --redis: 25 records nobody
// read on prod:0 show as rscoord_shard_lag_records{shard="0"} 25 within
// one collector interval, next to every gauge the collector feeds.
func TestMetricsShowShardLag(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	rs := redistest.Standalone(t)
	const interval = 500 * time.Millisecond
	p := startProcess(t, t.TempDir(), "--redis", rs.Addr, "--metrics-interval", interval.String(), "--metrics-timeout", interval.String())
	defer func() {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("stop: %v\n%s", err, p.output())
		}
	}()
	s := coordtest.Remote(t, p.url)
	s.Authorization = coordtest.Basic("admin", testAdminPassword)
	s.CreateStream("prod", 2)
	a := coordtest.NewMember("a", "prod", "prod")
	coordtest.Converge(t, s, 6, a)
	ctx := context.Background()
	rdb := rs.Client()
	if err := redistest.CreateShards(ctx, rdb, "prod", 2, "prod"); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "prod:0", Values: map[string]any{"n": i}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	added := time.Now()
	// One interval until the next round starts, plus slack for the round
	// itself and the scrape on a loaded machine.
	deadline := added.Add(interval + time.Second)
	var fams map[string]*dto.MetricFamily
	if !poll.Wait(time.Until(deadline), 50*time.Millisecond, func() bool {
		fams = scrapeMetrics(t, s)
		return gaugeValue(fams, metrics.ShardLagRecords, map[string]string{"stream": "prod", "group": "prod", "shard": "0"}) == 25
	}) {
		t.Fatalf("no %s{shard=\"0\"} 25 within %v of the writes; lag series: %v", metrics.ShardLagRecords, interval, fams[metrics.ShardLagRecords])
	}
	shard0 := map[string]string{"stream": "prod", "group": "prod", "shard": "0"}
	shard1 := map[string]string{"stream": "prod", "group": "prod", "shard": "1"}
	member := map[string]string{"stream": "prod", "group": "prod", "member": "a"}
	checks := []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
	}{
		{metrics.ShardLengthRecords, shard0, func(v float64) bool { return v == 25 }},
		{metrics.ShardPendingRecords, shard0, func(v float64) bool { return v == 0 }},
		{metrics.ShardLagRecords, shard1, func(v float64) bool { return v == 0 }},
		{metrics.MemberHeartbeatAgeSeconds, member, func(v float64) bool { return v >= 0 && v < 60 }},
		{metrics.MemberLeaseRemainingSeconds, member, func(v float64) bool { return v > -60 && v <= 15 }},
		{metrics.MemberSeriesCapped, nil, func(v float64) bool { return v == 0 }},
		{metrics.RedisUp, nil, func(v float64) bool { return v == 1 }},
		{metrics.CollectionDurationSeconds, nil, func(v float64) bool { return v >= 0 && v <= interval.Seconds() }},
		{metrics.CollectionErrorsTotal, nil, func(v float64) bool { return v == 0 }},
		{metrics.BuildInfo, nil, func(v float64) bool { return v == 1 }},
		{metrics.GroupStateInfo, map[string]string{"stream": "prod", "group": "prod", "state": "STABLE"}, func(v float64) bool { return v == 1 }},
	}
	for _, c := range checks {
		if v := gaugeValue(fams, c.name, c.labels); !c.ok(v) {
			t.Errorf("%s%v = %v", c.name, c.labels, v)
		}
	}
	bi := fams[metrics.BuildInfo].GetMetric()[0]
	for _, l := range bi.GetLabel() {
		if l.GetValue() == "" {
			t.Errorf("%s has an empty %s label", metrics.BuildInfo, l.GetName())
		}
	}
}

// scrapeMetrics reads /metrics and parses it strictly.
func scrapeMetrics(t *testing.T, s *coordtest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	status, raw := s.Do(http.MethodGet, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, raw)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// gaugeValue is the value of the first series of name whose labels
// include labels (counter or gauge), or -1e9 when there is none.
func gaugeValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
next:
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1e9
}
