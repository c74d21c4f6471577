// Package alertrules reads the Prometheus alerting rules the project ships
// (deploy/prometheus/rules.yaml), for the tests that hold them against the
// metrics the server exports, its runbooks and its dashboard.
package alertrules

import (
	"bytes"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

// Rule is one alerting rule of the file.
type Rule struct {
	// Group is the name of the rule group it is in.
	Group       string
	Alert       string
	Expr        string
	For         string
	Labels      map[string]string
	Annotations map[string]string
}

// Load returns the rules of the file at path, in file order. A field the
// rule format does not have fails it: a misspelt key would otherwise be
// dropped, and the alert would not say what its author meant.
func Load(path string) ([]Rule, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Rule
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out = append(out, Rule{Group: g.Name, Alert: r.Alert, Expr: r.Expr, For: r.For, Labels: r.Labels, Annotations: r.Annotations})
		}
	}
	return out, nil
}

// Exprs returns the expression of every alert the rules at path name, by
// alert name.
func Exprs(path string) (map[string]string, error) {
	rules, err := Load(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rules))
	for _, r := range rules {
		out[r.Alert] = r.Expr
	}
	return out, nil
}
