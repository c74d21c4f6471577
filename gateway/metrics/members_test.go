package metrics_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
)

// scrapeFamilies reads /metrics over HTTP and parses it strictly.
func scrapeFamilies(t *testing.T, s *coordtest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	status, raw := s.Do(http.MethodGet, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, raw)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// samples returns the gauges of name whose labels include labels, each
// with all its labels.
func samples(fams map[string]*dto.MetricFamily, name string, labels map[string]string) []map[string]string {
	var out []map[string]string
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
		have["value"] = model.SampleValue(m.GetGauge().GetValue()).String()
		out = append(out, have)
	}
	return out
}

func gauge(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		match := true
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
				match = false
			}
		}
		if match {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestMemberGaugesAreLiveAtEveryScrape runs a real coordinator over HTTP
// with the background collection at its default interval (15 s) and a
// member heartbeating every second: for 20 s every scrape shows its
// heartbeat at most 3 s old and its lease not lapsed, which a gauge
// computed from the collection's snapshot cannot (it reads up to 15 s
// old). A second member stops heartbeating at once: once its lease lapses
// it stays visible as EXPIRED, and its shards move to the live member,
// leaving none unowned.
func TestMemberGaugesAreLiveAtEveryScrape(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	a, b := coordtest.NewMember("a", "orders", "orders"), coordtest.NewMember("b", "orders", "orders")
	coordtest.Converge(t, s, 10, a, b)

	ctx, stop := context.WithCancel(context.Background())
	collected := make(chan error, 1)
	go func() {
		collected <- collector.Run(ctx, collector.Config{Source: s.Coord, Sink: s.Metrics, Interval: 15 * time.Second, Timeout: 10 * time.Second})
	}()
	defer func() {
		stop()
		if err := <-collected; err != nil {
			t.Error(err)
		}
	}()

	memberA := map[string]string{"stream": "orders", "group": "orders", "member": "a"}
	group := map[string]string{"stream": "orders", "group": "orders"}
	start := time.Now()
	lastBeat := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	scrapes := 0
	for {
		if time.Since(lastBeat) >= time.Second {
			a.Beat(s)
			lastBeat = time.Now()
		}
		fams := scrapeFamilies(t, s)
		scrapes++
		age, okAge := gauge(fams, metrics.MemberHeartbeatAgeSeconds, memberA)
		lease, okLease := gauge(fams, metrics.MemberLeaseRemainingSeconds, memberA)
		at := time.Since(start).Round(time.Millisecond)
		if !okAge || !okLease {
			t.Fatalf("at %v: member a has no heartbeat age or lease series: %v", at, samples(fams, metrics.MemberHeartbeatAgeSeconds, nil))
		}
		if age > 3 || lease <= 0 {
			t.Fatalf("at %v: member a heartbeating every second shows a heartbeat age of %.2fs and %.2fs of lease left", at, age, lease)
		}
		if time.Since(start) >= 20*time.Second {
			expired := samples(fams, metrics.MemberCurrentShards, map[string]string{"member": "b", "state": "EXPIRED"})
			owned := samples(fams, metrics.ShardOwner, memberA)
			unowned, _ := gauge(fams, metrics.GroupUnownedShards, group)
			if len(expired) == 1 && len(owned) == 4 && unowned == 0 {
				break
			}
			if time.Since(start) > 40*time.Second {
				t.Fatalf("b is not shown EXPIRED (%v), or a does not own all 4 shards (%v; %v unowned)", expired, owned, unowned)
			}
		}
		<-tick.C
	}
	t.Logf("%d scrapes in %v", scrapes, time.Since(start).Round(time.Millisecond))
}
