package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rscoord/rscoord/gateway"
)

// redoclyCLI is the pinned linter: releases after it need Node.js 22,
// newer than Debian's.
const redoclyCLI = "@redocly/cli@2.77.0"

// TestOpenAPILintClean runs Redocly's recommended rules over the document
// the server serves: no errors and no warnings.
// It needs npx (Debian: nodejs and npm, which .ci/run installs) and the
// npm registry; without npx it fails, it does not skip.
func TestOpenAPILintClean(t *testing.T) {
	t.Parallel()
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatalf("npx not found on PATH: this test lints the served OpenAPI document with `npx %s lint`; "+
			"install Node.js and npm (apt-get install nodejs npm; .ci/run does it)", redoclyCLI)
	}
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	status, served := s.As("").Do(http.MethodGet, "/openapi.yaml", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /openapi.yaml: %d", status)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "openapi.yaml")
	if err := os.WriteFile(file, served, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npx, "--yes", redoclyCLI, "lint", file, "--format=json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false", "REDOCLY_TELEMETRY=off",
		"REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run() // exits 1 when there are errors; the report says which
	var report struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("npx %s lint gave no JSON report (%v, run: %v); is the npm registry reachable?\nstdout:\n%s\nstderr:\n%s",
			redoclyCLI, err, runErr, stdout.String(), stderr.String())
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("%s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	if report.Totals.Errors > 0 {
		t.Errorf("lint: %d errors", report.Totals.Errors)
	}
	if runErr != nil && len(report.Problems) == 0 {
		t.Errorf("npx %s lint failed without reporting a problem: %v\nstderr:\n%s", redoclyCLI, runErr, stderr.String())
	}
}

// TestOpenAPIOperationsComplete checks, without Node.js, what the linter
// would: servers, unique operationIds, declared tags, a 4xx per
// operation, and no nullable beside allOf.
func TestOpenAPIOperationsComplete(t *testing.T) {
	t.Parallel()
	var doc struct {
		Servers []struct {
			URL string `yaml:"url"`
		} `yaml:"servers"`
		Tags []struct {
			Name string `yaml:"name"`
		} `yaml:"tags"`
		Paths map[string]map[string]struct {
			OperationID string               `yaml:"operationId"`
			Tags        []string             `yaml:"tags"`
			Responses   map[string]yaml.Node `yaml:"responses"`
		} `yaml:"paths"`
	}
	raw := gateway.OpenAPI()
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 {
		t.Error("no servers")
	}
	tags := map[string]bool{}
	for _, tg := range doc.Tags {
		tags[tg.Name] = true
	}
	ids := map[string]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %s", where, other, op.OperationID)
			}
			ids[op.OperationID] = where
			if len(op.Tags) == 0 {
				t.Errorf("%s has no tag", where)
			}
			for _, tg := range op.Tags {
				if !tags[tg] {
					t.Errorf("%s has tag %q, not declared under tags", where, tg)
				}
			}
			has4xx := false
			for code := range op.Responses {
				has4xx = has4xx || strings.HasPrefix(code, "4")
			}
			if !has4xx {
				t.Errorf("%s documents no 4xx answer", where)
			}
		}
	}
	var node yaml.Node
	if err := yaml.Unmarshal(raw, &node); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			keys := map[string]bool{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				keys[n.Content[i].Value] = true
			}
			if keys["nullable"] && keys["allOf"] {
				t.Errorf("line %d: nullable beside allOf (ignored by OpenAPI 3.0 tools)", n.Line)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&node)
}
