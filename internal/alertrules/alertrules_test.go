package alertrules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string // group/alert of each rule, in order
		err        string
	}{
		{"two groups", "groups:\n  - name: a\n    rules:\n      - alert: X\n        expr: up == 0\n        for: 5m\n  - name: b\n    rules:\n      - alert: Y\n        expr: up == 1\n",
			[]string{"a/X", "b/Y"}, ""},
		{"a misspelt key", "groups:\n  - name: a\n    rules:\n      - alert: X\n        exprr: up == 0\n", nil, "exprr"},
		{"no file", "", nil, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			rules, err := Load(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rules {
				got = append(got, r.Group+"/"+r.Alert)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("rules %v, want %v", got, tc.want)
			}
		})
	}
}

// TestShippedRulesLoad: the project's own file reads.
func TestShippedRulesLoad(t *testing.T) {
	exprs, err := Exprs("../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if exprs["RscoordGroupNotStable"] == "" {
		t.Fatalf("no RscoordGroupNotStable in %d alerts", len(exprs))
	}
}
