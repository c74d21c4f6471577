package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/alertrules"
)

// declared is every metric name the registry describes, histograms with
// their _bucket, _sum and _count series.
func declared(t *testing.T) map[string]bool {
	t.Helper()
	// Every descriptor is taken before any is checked: a t.Fatalf inside
	// the range would leave Describe blocked on its send.
	ch := make(chan *prometheus.Desc)
	go func() {
		metrics.New().Registry().Describe(ch)
		close(ch)
	}()
	var descs []*prometheus.Desc
	for d := range ch {
		descs = append(descs, d)
	}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for _, d := range descs {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("descriptor without a name: %s", d)
		}
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			out[m[1]+suffix] = true
		}
	}
	return out
}

// selectors parses expr as PromQL (variables replaced as Grafana would)
// and returns the metric names it selects and their matchers.
func selectors(t *testing.T, expr string) []*parser.VectorSelector {
	t.Helper()
	expr = strings.NewReplacer("$__rate_interval", "5m", "$stream", "orders", "$group", "orders").Replace(expr)
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Errorf("%q does not parse: %v", expr, err)
		return nil
	}
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	if len(out) == 0 {
		t.Errorf("%q selects no metric", expr)
	}
	return out
}

type dashboard struct {
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardUsesRealMetrics keeps deploy/grafana's dashboard in step
// with this package: its variables, its rows, and every metric a panel
// queries must be one the registry declares; per-group series follow the
// stream and group variables (per-stream ones, shard memory, the stream
// variable).
func TestDashboardUsesRealMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/rscoord-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && !strings.Contains(strings.ReplaceAll(toJSON(v.Query), `\"`, `"`), "rscoord_") {
			t.Errorf("variable %s queries no rscoord metric: %v", v.Name, v.Query)
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "stream": "query", "group": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s is %q, want %q", name, vars[name], typ)
		}
	}
	var rows []string
	for _, p := range dash.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
		}
	}
	for _, want := range []string{"Health", "Ownership and members", "Lag", "Pending", "Heartbeat age", "Heartbeat statuses",
		"Rebalances and migrations", "Store latency", "HTTP requests"} {
		if !slices.Contains(rows, want) {
			t.Errorf("no row %q (rows: %v)", want, rows)
		}
	}
	names := declared(t)
	used := map[string]bool{}
	perMember := map[string]bool{metrics.MemberHeartbeatAgeSeconds: true, metrics.MemberLeaseRemainingSeconds: true,
		metrics.MemberCurrentShards: true, metrics.MemberRevokingShards: true, metrics.MemberMaxConcurrency: true,
		metrics.MemberAvailableConcurrency: true}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		for _, tg := range p.Targets {
			perStream := strings.Contains(tg.Expr, `stream=~"$stream"`)
			perGroup := perStream && strings.Contains(tg.Expr, `group=~"$group"`)
			for _, vs := range selectors(t, tg.Expr) {
				used[vs.Name] = true
				if !names[vs.Name] {
					t.Errorf("panel %q queries %s, which the registry does not declare", p.Title, vs.Name)
				}
				if vs.Name == metrics.ShardMemoryBytes {
					// A shard key's memory is the stream's, whatever group reads it.
					if !perStream {
						t.Errorf("panel %q shows %s without the stream variable", p.Title, vs.Name)
					}
					continue
				}
				if strings.HasPrefix(vs.Name, "rscoord_shard_") || perMember[vs.Name] {
					if !perGroup {
						t.Errorf("panel %q shows %s without the stream and group variables", p.Title, vs.Name)
					}
				}
			}
		}
	}
	for _, must := range []string{metrics.ShardLagRecords, metrics.ShardPendingRecords, metrics.MemberHeartbeatAgeSeconds,
		"rscoord_heartbeats_total", "rscoord_rebalances_total", "rscoord_migrations", "rscoord_store_write_duration_seconds_bucket",
		metrics.HeldHeartbeats, metrics.HeldHeartbeatsLimit, metrics.HTTPConnections, metrics.HTTPConnectionsLimit,
		metrics.HTTPHeldConnections, metrics.HTTPHeldConnectionsLimit, metrics.ShardOwner, metrics.GroupUnownedShards,
		metrics.ShardMemoryBytes, metrics.MemberLeaseRemainingSeconds, metrics.MemberCurrentShards, metrics.MemberRevokingShards,
		metrics.MemberMaxConcurrency, metrics.MemberAvailableConcurrency, metrics.HTTPRequestsTotal,
		metrics.HTTPRequestDurationSeconds + "_bucket"} {
		if !used[must] {
			t.Errorf("no panel shows %s", must)
		}
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAlertRules parses every expression of deploy/prometheus/rules.yaml
// and checks it uses only declared metrics (and Prometheus's up), that
// each alert has a severity and a runbook section in docs/operations.md.
func TestAlertRules(t *testing.T) {
	rules, err := alertrules.Load("../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	names := declared(t)
	names["up"] = true
	alerts := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" || alerts[r.Alert] {
			t.Errorf("group %s: a rule without a unique alert name: %q", r.Group, r.Alert)
		}
		alerts[r.Alert] = true
		for _, vs := range selectors(t, r.Expr) {
			if !names[vs.Name] {
				t.Errorf("%s uses %s, which the registry does not declare", r.Alert, vs.Name)
			}
		}
		if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" && sev != "info" {
			t.Errorf("%s: severity %q", r.Alert, sev)
		}
		if r.Annotations["summary"] == "" || r.Annotations["runbook"] != "docs/operations.md#"+strings.ToLower(r.Alert) {
			t.Errorf("%s: needs a summary and runbook docs/operations.md#%s", r.Alert, strings.ToLower(r.Alert))
		}
		if !strings.Contains(string(ops), "### "+r.Alert+"\n") {
			t.Errorf("docs/operations.md has no section ### %s", r.Alert)
		}
	}
	for _, want := range []string{"RscoordMemberHeartbeatLate", "RscoordGroupNotStable", "RscoordShardLagGrowing", "RscoordInvariantViolation",
		"RscoordStoreWriteErrors", "RscoordRedisUnreachable", "RscoordClusterReplicaDown", "RscoordClusterGroupUnowned",
		"RscoordClusterStoreUnreadable", "RscoordMigrationNotFinishing", "RscoordHeldHeartbeatsNearLimit",
		"RscoordHTTPConnectionsNearLimit", "RscoordHTTPHeldConnectionsNearLimit", "RscoordShardUnowned", "RscoordShardBigKey"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}
