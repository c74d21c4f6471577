package alertrules

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	shippedRules = "../../deploy/prometheus/rules.yaml"
	shippedTests = "../../deploy/prometheus/rules_test.yaml"
)

// promtool returns the path of Debian's promtool (package prometheus),
// failing the test when it is missing: these tests never skip.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (apt-get install prometheus; .ci/run does): %v", err)
	}
	return path
}

// testRules runs `promtool test rules` on the test file at path, in its
// directory (rule_files are relative to it).
func testRules(t *testing.T, path string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), "test", "rules", filepath.Base(path))
	cmd.Dir = filepath.Dir(path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestShippedRulesPassPromtool runs deploy/prometheus/rules_test.yaml.
func TestShippedRulesPassPromtool(t *testing.T) {
	if out, err := testRules(t, shippedTests); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestPromtoolCatchesAWrongExpectation keeps the run above honest: the
// shipped cases with one expectation changed must fail.
func TestPromtoolCatchesAWrongExpectation(t *testing.T) {
	dir := t.TempDir()
	rules, err := os.ReadFile(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := os.ReadFile(shippedTests)
	if err != nil {
		t.Fatal(err)
	}
	const right = `summary: "rscoord rscoord:8080 does not answer scrapes"`
	if !bytes.Contains(cases, []byte(right)) {
		t.Fatalf("%s has no %s to change", shippedTests, right)
	}
	cases = bytes.Replace(cases, []byte(right), []byte(`summary: "rscoord rscoord:8080 answers scrapes"`), 1)
	for name, raw := range map[string][]byte{"rules.yaml": rules, "rules_test.yaml": cases} {
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := testRules(t, filepath.Join(dir, "rules_test.yaml"))
	if err == nil {
		t.Fatalf("promtool passed a wrong expectation:\n%s", out)
	}
	if !strings.Contains(out, "answers scrapes") {
		t.Errorf("promtool failed for another reason than the changed expectation: %v\n%s", err, out)
	}
}

// TestEveryRuleIsTestedAndWaits: every alert has a `for:` and promtool
// cases in which it fires and in which it stays quiet.
func TestEveryRuleIsTestedAndWaits(t *testing.T) {
	rules, err := Load(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(shippedTests)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range rules {
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for %q; every rule waits for its signal to last", r.Alert, r.For)
		}
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("%s: %s has no case where it fires (%v) or none where it stays quiet (%v)", r.Alert, shippedTests, fires[r.Alert], quiet[r.Alert])
		}
	}
}
