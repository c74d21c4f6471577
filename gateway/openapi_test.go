package gateway_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"go.yaml.in/yaml/v3"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// TestOpenAPICoversEveryRoute walks gin's route list and the document's
// paths: each must hold exactly the other's method+path pairs.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	for _, memberAuth := range []bool{false, true} {
		h := gateway.New(newFake(), gateway.Options{
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Auth: s.Auth, NoMemberAuth: !memberAuth,
		})
		engine, ok := h.(*gin.Engine)
		if !ok {
			t.Fatalf("gateway.New returned %T, not a *gin.Engine", h)
		}
		param := regexp.MustCompile(`[:*]([A-Za-z]+)`)
		routes := map[string]bool{}
		for _, r := range engine.Routes() {
			routes[strings.ToLower(r.Method)+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
		}
		var doc struct {
			OpenAPI string                          `yaml:"openapi"`
			Paths   map[string]map[string]yaml.Node `yaml:"paths"`
		}
		if err := yaml.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
			t.Fatalf("openapi.yaml does not parse: %v", err)
		}
		if !strings.HasPrefix(doc.OpenAPI, "3.") {
			t.Fatalf("openapi version %q", doc.OpenAPI)
		}
		documented := map[string]bool{}
		for path, ops := range doc.Paths {
			for method := range ops {
				documented[method+" "+path] = true
			}
		}
		if missing := difference(routes, documented); len(missing) > 0 {
			t.Errorf("routes missing from openapi.yaml: %v", missing)
		}
		if extra := difference(documented, routes); len(extra) > 0 {
			t.Errorf("openapi.yaml documents routes the server lacks: %v", extra)
		}
		if len(routes) < 20 {
			t.Fatalf("only %d routes: the walk is broken", len(routes))
		}
	}
	// Served without credentials.
	status, raw := s.As("").Do(http.MethodGet, "/openapi.yaml", nil)
	if status != http.StatusOK || !bytes.Equal(raw, gateway.OpenAPI()) {
		t.Fatalf("GET /openapi.yaml: %d", status)
	}
}

func difference(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenAPILimitsAreTheServers: every ?limit the document names states
// the bounds the server enforces, so that a client generated from it
// never sends a page size the server refuses: the server answers 400 just
// outside the documented minimum and maximum, and not at them. A limit
// marked x-clamped (the reference design's page sizes) is answered 200
// just outside them too.
func TestOpenAPILimitsAreTheServers(t *testing.T) {
	t.Parallel()
	type schema struct {
		Minimum *int `yaml:"minimum"`
		Maximum *int `yaml:"maximum"`
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name    string `yaml:"name"`
				In      string `yaml:"in"`
				Clamped bool   `yaml:"x-clamped"`
				Schema  schema `yaml:"schema"`
			} `yaml:"parameters"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	// The coordinator enforces these limits: a real one answers.
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	checked := 0
	for path, ops := range doc.Paths {
		op, ok := ops["get"]
		if !ok {
			continue
		}
		for _, p := range op.Parameters {
			if p.Name != "limit" || p.In != "query" {
				continue
			}
			checked++
			if p.Schema.Minimum == nil || p.Schema.Maximum == nil {
				t.Errorf("GET %s: ?limit without minimum and maximum", path)
				continue
			}
			url := strings.NewReplacer("{prefix}", "orders", "{group}", "orders", "{shard}", "0").Replace(path) +
				"?streamPrefix=orders&shard=0&limit="
			for _, tc := range []struct {
				limit int
				bad   bool
			}{
				{*p.Schema.Minimum - 1, !p.Clamped}, {*p.Schema.Maximum + 1, !p.Clamped},
				{*p.Schema.Minimum, false}, {*p.Schema.Maximum, false},
			} {
				status, raw := s.Do(http.MethodGet, url+strconv.Itoa(tc.limit), nil)
				if (status == http.StatusBadRequest) != tc.bad {
					t.Errorf("GET %s?limit=%d: %d %.200s, documented bounds %d..%d", path, tc.limit, status, raw,
						*p.Schema.Minimum, *p.Schema.Maximum)
				}
			}
		}
	}
	if checked < 3 {
		t.Fatalf("only %d ?limit parameters found: the walk is broken", checked)
	}
}

// TestOpenAPILicenseMatchesRepository checks that the document names the
// licence of the LICENSE file at the repository root.
func TestOpenAPILicenseMatchesRepository(t *testing.T) {
	var doc struct {
		Info struct {
			License struct {
				Name string `yaml:"name"`
				URL  string `yaml:"url"`
			} `yaml:"license"`
		} `yaml:"info"`
	}
	if err := yaml.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(license, []byte("Apache License\n                           Version 2.0, January 2004")) {
		t.Fatal("LICENSE is not the Apache License 2.0 text")
	}
	if doc.Info.License.Name != "Apache-2.0" || doc.Info.License.URL != "https://www.apache.org/licenses/LICENSE-2.0" {
		t.Errorf("info.license is %+v, want Apache-2.0 as in LICENSE", doc.Info.License)
	}
}
