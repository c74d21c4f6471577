package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardUsesRealMetrics keeps deploy/grafana's dashboard in step
// with this package: every metric a panel queries must be one this package
// declares (histograms through their _bucket series).
func TestDashboardUsesRealMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/rscoord-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	name := regexp.MustCompile(`"(rscoord_[a-z_]+)"`)
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			declared[m[1]] = true
		}
	}
	used := regexp.MustCompile(`rscoord_[a-z_]+`)
	if len(dash.Panels) < 8 {
		t.Fatalf("dashboard has %d panels", len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range used.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(m, "_bucket")
				if !declared[base] {
					t.Errorf("panel %q queries %s, which package metrics does not declare", p.Title, m)
				}
			}
		}
	}
}
