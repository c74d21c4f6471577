package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/alertrules"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestBinaryCapsNearTheirLimits: a server with small caps, driven to them
// (six members each holding a heartbeat on a connection of its own, and
// idle connections up to the connection cap), exports every usage beside
// its cap, and the alerts of deploy/prometheus/rules.yaml on them hold on
// that scrape while none does on the idle server's.
func TestBinaryCapsNearTheirLimits(t *testing.T) {
	t.Parallel()
	const conns, held = 8, 6 // three quarters of 8 connections: 6 may be held
	p := startProcess(t, t.TempDir(), "--no-auth", "--http-max-connections", fmt.Sprint(conns),
		"--max-held-heartbeats", fmt.Sprint(held), "--heartbeat-interval", "20s", "--member-lease", "60s")
	s := coordtest.Remote(t, p.url)
	alerts := capAlerts(t)

	idle := scrapeMetrics(t, s)
	for name, want := range map[string]float64{
		metrics.HeldHeartbeatsLimit: held, metrics.HTTPConnectionsLimit: conns, metrics.HTTPHeldConnectionsLimit: held,
		metrics.HeldHeartbeats: 0, metrics.HTTPHeldConnections: 0,
	} {
		if got := gaugeValue(idle, name, nil); got != want {
			t.Errorf("idle server: %s = %v, want %v", name, got, want)
		}
	}
	if got := gaugeValue(idle, metrics.HTTPConnections, nil); got < 1 || got > conns {
		t.Errorf("idle server: %s = %v, want the scrape's own connection and at most %d", metrics.HTTPConnections, got, conns)
	}
	for alert, expr := range alerts {
		if firing := evalAlert(t, expr, idle); firing {
			t.Errorf("%s (%s) holds on an idle server", alert, expr)
		}
	}

	s.CreateStream("orders", held)
	members := make([]*coordtest.Member, held)
	for i := range members {
		members[i] = coordtest.NewMember(fmt.Sprintf("m%d", i), "orders", "orders")
	}
	coordtest.Converge(t, s, 10, members...)
	answered := make(chan error, held)
	for _, m := range members {
		req := m.Request()
		req.WaitMs = 15_000
		raw, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		// A client of its own: one connection per held heartbeat.
		tr := &http.Transport{DisableKeepAlives: true}
		t.Cleanup(tr.CloseIdleConnections)
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		go func() {
			resp, err := c.Post(p.url+protocol.BasePath+"/streams/orders/groups/orders/members/"+m.ID+"/heartbeat",
				"application/json", bytes.NewReader(raw))
			if err == nil {
				resp.Body.Close()
			}
			answered <- err
		}()
	}
	waitGauge(t, s, metrics.HeldHeartbeats, held)
	// Idle connections up to the cap: the scrape's own then closes the
	// one idle longest to make room.
	for range conns - held {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	full := waitGauge(t, s, metrics.HTTPConnections, conns)
	for name, want := range map[string]float64{
		metrics.HeldHeartbeats: held, metrics.HeldHeartbeatsLimit: held,
		metrics.HTTPHeldConnections: held, metrics.HTTPHeldConnectionsLimit: held,
		metrics.HTTPConnections: conns, metrics.HTTPConnectionsLimit: conns,
	} {
		if got := gaugeValue(full, name, nil); got != want {
			t.Errorf("at the caps: %s = %v, want %v", name, got, want)
		}
	}
	for alert, expr := range alerts {
		if firing := evalAlert(t, expr, full); !firing {
			t.Errorf("%s (%s) does not hold at the caps", alert, expr)
		}
	}

	// The held heartbeats are answered when the server stops.
	if err := p.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range held {
		if err := <-answered; err != nil {
			t.Errorf("held heartbeat at shutdown: %v", err)
		}
	}
	if err := p.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.output())
	}
}

// waitGauge scrapes until name reaches want (5 s at most) and returns that
// scrape.
func waitGauge(t *testing.T, s *coordtest.Server, name string, want float64) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	var got float64
	if !poll.Wait(20*time.Second, 20*time.Millisecond, func() bool {
		fams = scrapeMetrics(t, s)
		got = gaugeValue(fams, name, nil)
		return got == want
	}) {
		t.Fatalf("%s = %v, want %v", name, got, want)
	}
	return fams
}

// capAlerts are the expressions of the alerts on the caps, from
// deploy/prometheus/rules.yaml.
func capAlerts(t *testing.T) map[string]string {
	t.Helper()
	all, err := alertrules.Exprs("../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for alert, expr := range all {
		if strings.HasSuffix(alert, "NearLimit") {
			out[alert] = expr
		}
	}
	for _, want := range []string{"RscoordHeldHeartbeatsNearLimit", "RscoordHTTPConnectionsNearLimit", "RscoordHTTPHeldConnectionsNearLimit"} {
		if out[want] == "" {
			t.Fatalf("rules.yaml has no alert %s (has %v)", want, slices.Sorted(maps.Keys(out)))
		}
	}
	return out
}

// sample is one series of an instant vector: its labels without the
// metric name, and its value.
type sample struct {
	labels string
	value  float64
}

// evalAlert evaluates expr, as Prometheus would at one instant, on one
// scrape and reports whether its result has a series (the alert's
// condition holds; its for: is left to Prometheus). It knows the few
// forms the cap alerts use: selectors of label-less gauges, numbers,
// arithmetic and filtering comparisons, matched one to one.
func evalAlert(t *testing.T, expr string, fams map[string]*dto.MetricFamily) bool {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	var eval func(parser.Node) (vec []sample, scalar float64, isScalar bool)
	eval = func(n parser.Node) ([]sample, float64, bool) {
		switch n := n.(type) {
		case *parser.ParenExpr:
			return eval(n.Expr)
		case *parser.NumberLiteral:
			return nil, n.Val, true
		case *parser.VectorSelector:
			var vec []sample
			for _, m := range fams[n.Name].GetMetric() {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				vec = append(vec, sample{labels: strings.Join(ls, ","), value: m.GetGauge().GetValue()})
			}
			return vec, 0, false
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && (len(vm.MatchingLabels) > 0 || vm.Card != parser.CardOneToOne) || n.ReturnBool {
				t.Fatalf("%q: only one-to-one matching on every label is evaluated here", expr)
			}
			lv, ls, lScalar := eval(n.LHS)
			rv, rs, rScalar := eval(n.RHS)
			op := func(a, b float64) (float64, bool) {
				switch n.Op {
				case parser.MUL:
					return a * b, true
				case parser.DIV:
					return a / b, true
				case parser.ADD:
					return a + b, true
				case parser.SUB:
					return a - b, true
				case parser.GTR:
					return a, a > b
				case parser.GTE:
					return a, a >= b
				case parser.LSS:
					return a, a < b
				case parser.LTE:
					return a, a <= b
				case parser.EQLC:
					return a, a == b
				case parser.NEQ:
					return a, a != b
				}
				t.Fatalf("%q: operator %s is not evaluated here", expr, n.Op)
				return 0, false
			}
			switch {
			case lScalar && rScalar:
				v, _ := op(ls, rs)
				return nil, v, true
			case rScalar:
				var out []sample
				for _, s := range lv {
					if v, keep := op(s.value, rs); keep {
						out = append(out, sample{s.labels, v})
					}
				}
				return out, 0, false
			case lScalar:
				var out []sample
				for _, s := range rv {
					if v, keep := op(ls, s.value); keep {
						if n.Op.IsComparisonOperator() {
							v = s.value // a filter keeps the vector's value
						}
						out = append(out, sample{s.labels, v})
					}
				}
				return out, 0, false
			}
			byLabels := map[string]float64{}
			for _, s := range rv {
				byLabels[s.labels] = s.value
			}
			var out []sample
			for _, s := range lv {
				if r, ok := byLabels[s.labels]; ok {
					if v, keep := op(s.value, r); keep {
						out = append(out, sample{s.labels, v})
					}
				}
			}
			return out, 0, false
		}
		t.Fatalf("%q: %T is not evaluated here", expr, n)
		return nil, 0, false
	}
	vec, _, isScalar := eval(e)
	if isScalar {
		t.Fatalf("%q is a scalar, not an alert condition", expr)
	}
	return len(vec) > 0
}

// TestClusterReplicaExportsItsCaps: in the cluster mode the replica's
// listener (the front, which outlives each run of the coordinator) is the
// HTTP server whose connections and caps the metrics report.
func TestClusterReplicaExportsItsCaps(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	r := startReplica(t, c, "r1", freeLoopbackPort(t), "--http-max-connections", "64")
	s := asAdmin(t, r.url)
	fams := scrapeMetrics(t, s)
	for name, want := range map[string]float64{
		metrics.HTTPConnectionsLimit: 64, metrics.HTTPHeldConnectionsLimit: 48, metrics.HeldHeartbeatsLimit: 48,
		metrics.HTTPHeldConnections: 0,
	} {
		if got := gaugeValue(fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := gaugeValue(fams, metrics.HTTPConnections, nil); got < 1 || got > 64 {
		t.Errorf("%s = %v, want the scrape's own connection and at most 64", metrics.HTTPConnections, got)
	}
}
