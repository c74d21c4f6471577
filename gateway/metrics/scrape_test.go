package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/metrics/collector"
	"github.com/rscoord/rscoord/internal/alertrules"
	"github.com/rscoord/rscoord/redisops"
)

// series is one scraped sample's labels, its metric name included.
type series = map[string]string

// liveScrape runs a coordinator with Redis, a stream with lag and two
// members, one collection round and the cluster gauges cluster mode sets,
// and returns every series of /metrics by name (histograms as their
// _bucket, _sum and _count series).
func liveScrape(t *testing.T) map[string][]series {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Redis: redisops.Wrap(rdb),
		Group: assign.Config{MemberLease: 10 * time.Minute}})
	s.CreateStream("orders", 2)
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"k", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	a, b := coordtest.NewMember("a", "orders", "orders"), coordtest.NewMember("b", "orders", "orders")
	coordtest.Converge(t, s, 6, a, b)
	collector.Round(ctx, collector.Config{Source: s.Coord, Sink: s.Metrics, Memory: collector.RedisMemory(rdb), Interval: 5 * time.Second, Timeout: 5 * time.Second})
	// What cmd/rscoord's cluster mode sets every second.
	s.Metrics.SetClusterReplicasLive(3)
	s.Metrics.SetClusterGroupsUnowned(0)
	// What cmd/rscoord sets with the HTTP server it serves through (the
	// test server serves through httptest, which has no caps).
	s.Metrics.SetConnectionSource(gateway.NewHTTPServer(http.NotFoundHandler(), gateway.HTTPLimits{MaxConnections: 8}, nil, nil))

	status, raw := s.Do(http.MethodGet, "/actuator/prometheus", nil)
	if status != http.StatusOK {
		t.Fatalf("scrape: %d %s", status, raw)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("scrape does not parse: %v", err)
	}
	out := map[string][]series{}
	add := func(name string, base series, extra ...string) {
		l := maps.Clone(base)
		l["__name__"] = name
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		out[name] = append(out[name], l)
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			// Prometheus adds the target's labels to every series.
			base := series{"job": "rscoord", "instance": "rscoord:8080"}
			for _, l := range m.GetLabel() {
				base[l.GetName()] = l.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				for _, bk := range h.GetBucket() {
					add(name+"_bucket", base, "le", fmt.Sprint(bk.GetUpperBound()))
				}
				add(name+"_bucket", base, "le", "+Inf")
				add(name+"_sum", base)
				add(name+"_count", base)
				continue
			}
			add(name, base)
		}
	}
	// Prometheus's own series of the scrape target.
	out["up"] = []series{{"__name__": "up", "job": "rscoord", "instance": "rscoord:8080"}}
	return out
}

// queryCheck checks one PromQL expression against a real scrape: each
// selector selects at least one series (so a renamed metric, a label the
// server does not export or a label value it never takes is caught), each
// aggregation groups by labels the series carry, and it returns the labels
// the expression's result carries.
func queryCheck(report func(format string, args ...any), where, expr string, scraped map[string][]series) map[string]bool {
	expr = strings.NewReplacer("$__rate_interval", "5m", "$stream", "orders", "$group", "orders").Replace(expr)
	e, err := parser.ParseExpr(expr)
	if err != nil {
		report("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var out func(parser.Node) map[string]bool
	out = func(n parser.Node) map[string]bool {
		switch n := n.(type) {
		case *parser.VectorSelector:
			have := map[string]bool{}
			matched := 0
		next:
			for _, s := range scraped[n.Name] {
				for _, m := range n.LabelMatchers {
					if !m.Matches(s[m.Name]) {
						continue next
					}
				}
				matched++
				for k := range s {
					if k != "__name__" {
						have[k] = true
					}
				}
			}
			if matched == 0 {
				report("%s: %s selects no series of a live scrape (metric names there: %d)", where, n, len(scraped))
			}
			return have
		case *parser.MatrixSelector:
			return out(n.VectorSelector)
		case *parser.ParenExpr:
			return out(n.Expr)
		case *parser.SubqueryExpr:
			return out(n.Expr)
		case *parser.UnaryExpr:
			return out(n.Expr)
		case *parser.NumberLiteral, *parser.StringLiteral:
			return map[string]bool{}
		case *parser.Call:
			var in map[string]bool
			for _, arg := range n.Args {
				if l := out(arg); len(l) > 0 || in == nil {
					in = l
				}
			}
			if n.Func.Name == "histogram_quantile" {
				if !in["le"] {
					report("%s: histogram_quantile over series without le", where)
				}
				delete(in, "le")
			}
			return in
		case *parser.AggregateExpr:
			in := out(n.Expr)
			if n.Param != nil {
				out(n.Param)
			}
			res := map[string]bool{}
			for _, g := range n.Grouping {
				if !in[g] {
					report("%s: %s groups by %s, which its series do not carry", where, n, g)
				}
				if !n.Without {
					res[g] = true
				}
			}
			if n.Without {
				res = maps.Clone(in)
				for _, g := range n.Grouping {
					delete(res, g)
				}
			}
			return res
		case *parser.BinaryExpr:
			lhs, rhs := out(n.LHS), out(n.RHS)
			if len(lhs) == 0 {
				return rhs
			}
			return lhs
		}
		report("%s: unhandled PromQL node %T", where, n)
		return nil
	}
	return out(e)
}

var (
	legendLabel     = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	annotationLabel = regexp.MustCompile(`\$labels\.(\w+)`)
)

// TestRulesAndDashboardMatchALiveScrape checks deploy/prometheus/rules.yaml
// and deploy/grafana's dashboard against what a running coordinator with
// Redis actually exports: every selector selects series, every label an
// alert's text or a panel's legend names is on the result.
func TestRulesAndDashboardMatchALiveScrape(t *testing.T) {
	scraped := liveScrape(t)

	rules, err := alertrules.Load("../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		result := queryCheck(t.Errorf, r.Alert, r.Expr, scraped)
		for _, k := range slices.Sorted(maps.Keys(r.Annotations)) {
			for _, m := range annotationLabel.FindAllStringSubmatch(r.Annotations[k], -1) {
				if !result[m[1]] {
					t.Errorf("%s: its %s names $labels.%s, which its result does not carry (%v)", r.Alert, k, m[1], slices.Sorted(maps.Keys(result)))
				}
			}
		}
	}

	raw, err := os.ReadFile("../../deploy/grafana/rscoord-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	variable := regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)
	for _, v := range dash.Templating.List {
		q, _ := v.Query.(map[string]any)
		if q == nil {
			continue
		}
		query, _ := q["query"].(string)
		m := variable.FindStringSubmatch(query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, query)
			continue
		}
		if have := queryCheck(t.Errorf, "variable "+v.Name, m[1], scraped); !have[m[2]] {
			t.Errorf("variable %s: %s carries no label %s", v.Name, m[1], m[2])
		}
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			result := queryCheck(t.Errorf, "panel "+p.Title, tg.Expr, scraped)
			for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
				if !result[m[1]] {
					t.Errorf("panel %q: legend %q names %s, which %s does not carry", p.Title, tg.LegendFormat, m[1], tg.Expr)
				}
			}
		}
	}
}

// TestQueryCheckCatchesMistakes keeps the live-scrape check honest: each
// broken expression below must be reported.
func TestQueryCheckCatchesMistakes(t *testing.T) {
	scraped := map[string][]series{
		"rscoord_group_state": {{"__name__": "rscoord_group_state", "stream": "orders", "group": "orders", "state": "STABLE"}},
	}
	for _, expr := range []string{
		`rscoord_group_stat == 1`,                         // a name the server does not export
		`rscoord_group_state{phase="STABLE"}`,             // a label it does not carry
		`rscoord_group_state{state="SETTLED"}`,            // a value it never takes
		`sum by (member) (rscoord_group_state)`,           // grouping by a missing label
		`histogram_quantile(0.9, rscoord_group_state)`,    // no le
		`rscoord_group_state > 0 and rscoord_group_stat2`, // either side counts
	} {
		t.Run(expr, func(t *testing.T) {
			var reports []string
			queryCheck(func(f string, args ...any) { reports = append(reports, fmt.Sprintf(f, args...)) }, "case", expr, scraped)
			if len(reports) == 0 {
				t.Errorf("%q passed the check", expr)
			}
		})
	}
}

// TestGroupNotStableSpansStateChanges: Prometheus counts an alert's for
// per result series, so a result that keeps the state label restarts the
// 10 minutes at every move between ASSIGNING and RECONCILING, and a
// rebalance that restarts again and again (a flapping member) never
// fires. The result must name the group only.
func TestGroupNotStableSpansStateChanges(t *testing.T) {
	exprs, err := alertrules.Exprs("../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	expr := exprs["RscoordGroupNotStable"]
	scraped := map[string][]series{}
	for _, st := range []string{"EMPTY", "ASSIGNING", "RECONCILING", "STABLE"} {
		scraped["rscoord_group_state"] = append(scraped["rscoord_group_state"],
			series{"__name__": "rscoord_group_state", "stream": "orders", "group": "orders", "state": st, "job": "rscoord", "instance": "i"})
	}
	result := queryCheck(t.Errorf, "RscoordGroupNotStable", expr, scraped)
	if result["state"] || !result["stream"] || !result["group"] {
		t.Errorf("RscoordGroupNotStable %q: its result carries %v; want stream and group, not state", expr, slices.Sorted(maps.Keys(result)))
	}
}
