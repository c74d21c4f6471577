package main

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// TestReadmeServerFlagsMatchServe checks every row of the "Server flags"
// table in docs/operations.md (the README links to it) against serve's own
// flags: the flag exists, and its environment variable and default are the
// ones the parser uses.
func TestReadmeServerFlagsMatchServe(t *testing.T) {
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "## Server flags")
	if start < 0 {
		t.Fatal("docs/operations.md has no Server flags section")
	}
	section := readme[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}

	var cli CLI
	parser, err := newParser(context.Background(), &cli, strings.NewReader(""), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]*kong.Flag{}
	for _, node := range parser.Model.Children {
		if node.Name == "serve" {
			for _, f := range node.Flags {
				flags[f.Name] = f
			}
		}
	}
	if len(flags) == 0 {
		t.Fatal("no serve flags in the parser's model")
	}

	row := regexp.MustCompile("(?m)^\\| `--(\\[no-\\])?([a-z0-9-]+)` \\| `([A-Z0-9_]+)` \\| ([^|]+) \\|")
	first := regexp.MustCompile("`([^`]*)`")
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) < 20 {
		t.Fatalf("found %d flag rows in the Server flags table; the pattern no longer matches it", len(rows))
	}
	for _, r := range rows {
		negatable, name, env, def := r[1] != "", r[2], r[3], strings.TrimSpace(r[4])
		f, ok := flags[name]
		if !ok {
			t.Errorf("docs/operations.md lists --%s, which serve does not have", name)
			continue
		}
		if got := strings.Join(f.Envs, ","); got != env {
			t.Errorf("--%s: docs/operations.md says env %s, serve reads %s", name, env, got)
		}
		if negatable != (f.Tag.Negatable != "") {
			t.Errorf("--%s: docs/operations.md negatable %v, serve %v", name, negatable, f.Tag.Negatable != "")
		}
		want := ""
		if m := first.FindStringSubmatch(def); m != nil {
			want = m[1]
		} else if def != "none" {
			t.Errorf("--%s: docs/operations.md default %q is neither a `value` nor none", name, def)
			continue
		}
		if f.Default != want {
			t.Errorf("--%s: docs/operations.md says default %q, serve's default is %q", name, want, f.Default)
		}
	}
}

// TestServeHelpTexts checks two lines of serve --help a newcomer reads:
// --redis shows one list placeholder (kong adds ",..." to a list's own),
// and --auto-create-groups names both ways a group is registered.
func TestServeHelpTexts(t *testing.T) {
	res := runCLI(context.Background(), "serve", "--help")
	if res.code != exitOK {
		t.Fatalf("serve --help: %+v", res)
	}
	help := strings.Join(strings.Fields(res.stdout), " ")
	if !strings.Contains(help, "--redis=HOST:PORT|URL,... ") {
		t.Errorf("--redis placeholder: %s", help[strings.Index(help, "--redis="):][:60])
	}
	if i := strings.Index(help, "--[no-]auto-create-groups"); i < 0 || !strings.Contains(help[i:i+300], "producer routing") {
		t.Errorf("--auto-create-groups help does not name producer routing: %s", help[i:i+200])
	}
}

// TestClusterDocFlagsExist checks that every flag the cluster mode's flag
// table in docs/cluster.md names is one of serve's.
func TestClusterDocFlagsExist(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	var cli CLI
	parser, err := newParser(context.Background(), &cli, strings.NewReader(""), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, node := range parser.Model.Children {
		if node.Name == "serve" {
			for _, f := range node.Flags {
				flags[f.Name] = true
			}
		}
	}
	cell := regexp.MustCompile("(?m)^\\| (`--[a-z0-9-]+`(?:, `--[a-z0-9-]+`)*) \\|")
	name := regexp.MustCompile("`--([a-z0-9-]+)`")
	n := 0
	for _, row := range cell.FindAllStringSubmatch(string(raw), -1) {
		for _, m := range name.FindAllStringSubmatch(row[1], -1) {
			n++
			if !flags[m[1]] {
				t.Errorf("docs/cluster.md lists --%s, which serve does not have", m[1])
			}
		}
	}
	if n < 8 {
		t.Fatalf("found %d flags in docs/cluster.md's table; the pattern no longer matches it", n)
	}
}
