package gateway_test

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// scrape reads /metrics (as the server's default credentials) and parses
// it strictly as the Prometheus text format.
func scrape(t *testing.T, s *coordtest.Server, path string) map[string]*dto.MetricFamily {
	t.Helper()
	status, raw := s.Do(http.MethodGet, path, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, raw)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	return families
}

// metricValue is the value of the series of name with exactly labels (a
// subset match), or -1 when there is none.
func metricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := families[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func checkMetric(t *testing.T, s *coordtest.Server, name string, labels map[string]string, ok func(float64) bool) {
	t.Helper()
	v := metricValue(scrape(t, s, "/metrics"), name, labels)
	if !ok(v) {
		t.Fatalf("%s%v = %v", name, labels, v)
	}
}

func TestMetricsMoveWithHeartbeats(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	s.CreateStream("orders", 4)
	before := scrape(t, s, "/metrics")
	okBefore := metricValue(before, "rscoord_heartbeats_total", map[string]string{"status": "OK"})
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders/producer-routing", nil, http.StatusOK, nil)
	s.Do(http.MethodGet, base+"/streams/nope/groups/orders/producer-routing", nil)

	for _, path := range []string{"/metrics", "/actuator/prometheus"} {
		after := scrape(t, s, path)
		okAfter := metricValue(after, "rscoord_heartbeats_total", map[string]string{"status": "OK"})
		if okAfter < okBefore+4 {
			t.Fatalf("%s: OK heartbeats %v → %v after at least 4", path, okBefore, okAfter)
		}
		checks := []struct {
			name   string
			labels map[string]string
			ok     func(float64) bool
		}{
			{"rscoord_heartbeat_duration_seconds", map[string]string{"held": "false"}, func(v float64) bool { return v >= okAfter }},
			{"rscoord_heartbeat_duration_seconds", map[string]string{"held": "true"}, func(v float64) bool { return v == 0 }},
			{"rscoord_members", map[string]string{"state": "ACTIVE"}, func(v float64) bool { return v == 2 }},
			{"rscoord_members", map[string]string{"state": "EXPIRED"}, func(v float64) bool { return v == 0 }},
			{"rscoord_groups", map[string]string{"state": "STABLE"}, func(v float64) bool { return v == 1 }},
			{"rscoord_group_epoch", map[string]string{"stream": "orders", "group": "orders"}, func(v float64) bool { return v == 2 }},
			{"rscoord_group_assignment_epoch", map[string]string{"stream": "orders", "group": "orders"}, func(v float64) bool { return v == 2 }},
			{"rscoord_group_pending_revocations", map[string]string{"stream": "orders", "group": "orders"}, func(v float64) bool { return v == 0 }},
			{"rscoord_group_invariant_violations", map[string]string{"stream": "orders", "group": "orders"}, func(v float64) bool { return v == 0 }},
			{"rscoord_member_joins_total", nil, func(v float64) bool { return v == 2 }},
			{"rscoord_rebalances_total", nil, func(v float64) bool { return v >= 2 }},
			{"rscoord_rebalance_duration_seconds", nil, func(v float64) bool { return v >= 1 }},
			{"rscoord_store_write_duration_seconds", map[string]string{"kind": "group"}, func(v float64) bool { return v >= 2 }},
			{"rscoord_store_write_duration_seconds", map[string]string{"kind": "audit"}, func(v float64) bool { return v == 1 }},
			{"rscoord_admin_mutations_total", map[string]string{"operation": "CREATE_STREAM", "outcome": "ACCEPTED"}, func(v float64) bool { return v == 1 }},
			{"rscoord_producer_routing_requests_total", map[string]string{"result": "OK"}, func(v float64) bool { return v == 1 }},
			{"rscoord_producer_routing_requests_total", map[string]string{"result": "STREAM_NOT_FOUND"}, func(v float64) bool { return v == 1 }},
			{"rscoord_migrations", map[string]string{"state": "ACTIVE"}, func(v float64) bool { return v == 0 }},
			{"go_goroutines", nil, func(v float64) bool { return v > 0 }},
		}
		for _, c := range checks {
			if v := metricValue(after, c.name, c.labels); !c.ok(v) {
				t.Errorf("%s: %s%v = %v", path, c.name, c.labels, v)
			}
		}
		for name, f := range after {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if (l.GetName() == "member" || l.GetName() == "memberId") && !metrics.MemberLabelled(name) {
						t.Errorf("%s carries a member label", name)
					}
				}
			}
		}
	}
}

// TestMetricsCountExpirationsAndFences drives a clock past a member's lease
// and past another's rebalance deadline.
func TestMetricsCountExpirationsAndFences(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	cfg := assign.Config{HeartbeatInterval: time.Second, MemberLease: 10 * time.Second, RebalanceTimeout: 5 * time.Second}
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: cfg, Now: clock.now})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	coordtest.Converge(t, s, 4, a)
	// b joins; a holds its revoked shards (slow handlers) past the
	// rebalance timeout and is fenced on its next heartbeat.
	a.HoldRevokes = true
	b := coordtest.NewMember("b", "orders", "orders")
	b.Beat(s)
	a.Beat(s)
	clock.advance(6 * time.Second)
	b.Beat(s)
	if resp := a.Beat(s); resp.Status != protocol.StatusFencedMemberEpoch {
		t.Fatalf("a past its rebalance deadline: %s", resp.Status)
	}
	checkMetric(t, s, "rscoord_member_fences_total", nil, func(v float64) bool { return v == 1 })
	checkMetric(t, s, "rscoord_member_expirations_total", nil, func(v float64) bool { return v == 0 })
	// Now b goes silent past its lease; a heartbeat of a rejoining a runs
	// the expiry.
	clock.advance(11 * time.Second)
	a.HoldRevokes = false
	a.Beat(s)
	checkMetric(t, s, "rscoord_member_expirations_total", nil, func(v float64) bool { return v == 1 })
	checkMetric(t, s, "rscoord_members", map[string]string{"state": "EXPIRED"}, func(v float64) bool { return v == 1 })
}

func TestMetricsNeedReadUnlessPublic(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	if status, _ := s.As("").Do(http.MethodGet, "/metrics", nil); status != http.StatusUnauthorized {
		t.Fatalf("anonymous scrape: %d", status)
	}
	pub := serveFake(t, newFake(), fakeOptions{Auth: true, Gateway: gateway.Options{MetricsPublic: true}})
	scrape(t, pub.As(""), "/metrics")
	scrape(t, pub.As("Bearer garbage"), "/actuator/prometheus")
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
