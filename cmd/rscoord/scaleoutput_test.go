package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestScaleOutputAgainstServer scales a stream of two groups on the built
// server with Redis and a short producer routing lease, so that the
// migration ends on its own: the scale table names the group of each row
// (the answer holds the one migration once per group), --wait ends once
// the new layout is in use and says so as done, and --json --wait prints
// only JSON: the answer, then one object per change.
func TestScaleOutputAgainstServer(t *testing.T) {
	rdb := redistest.Standalone(t)
	p := startProcess(t, t.TempDir(), "--redis", rdb.Addr,
		"--producer-routing-lease", "300ms", "--drain-check-interval", "100ms")
	cli := adminCLI(t, p.url)
	cli("stream", "create", "orders", "--shards", "2")
	cli("group", "create", "orders", "billing")

	res := cli("stream", "scale", "orders", "--to", "4", "--reason", "test", "--wait", "--poll", "50ms")
	lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
	var header string
	rows := map[string]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "GROUP"):
			header = l
		case len(f) > 1 && f[1] == "rs-1" && (f[0] == "billing" || f[0] == "orders"):
			rows[f[0]] = l
		}
	}
	if !strings.Contains(header, "RESHARDING ID") || len(rows) != 2 {
		t.Errorf("scale table does not name the group of each row (header %q, rows %v):\n%s", header, rows, res.stdout)
	}
	if !strings.Contains(res.stdout, "rs-1 done (2 → 4): producers and every group use 4 shards") || strings.Contains(res.stdout, "DEPRECATED (2 → 4)\n") {
		t.Fatalf("--wait did not end once the new layout was in use:\n%s", res.stdout)
	}
	// The progress lines come after the table; none is followed by a blank line.
	progress := res.stdout[strings.Index(res.stdout, "rs-1 done"):]
	if strings.Contains(progress, "\n\n") {
		t.Errorf("--wait progress has blank lines:\n%s", progress)
	}
	// stream migrations --wait follows it to its end.
	if res := cli("stream", "migrations", "orders", "--wait", "--poll", "50ms"); !strings.Contains(res.stdout, "rs-1 DEPRECATED (2 → 4)") {
		t.Fatalf("migrations --wait did not follow rs-1 to its end:\n%s", res.stdout)
	}

	res = cli("stream", "scale", "orders", "--to", "6", "--reason", "test", "--wait", "--poll", "50ms", "--json")
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	var answer protocol.ScaleResponse
	if err := dec.Decode(&answer); err != nil || answer.TargetShardCount != 6 || len(answer.Migrations) != 2 {
		t.Fatalf("--json --wait: first value is not the scale answer (%v, %+v):\n%s", err, answer, res.stdout)
	}
	var last protocol.Migration
	changes := 0
	for dec.More() {
		if err := dec.Decode(&last); err != nil {
			t.Fatalf("--json --wait: change %d is not JSON: %v\n%s", changes+1, err, res.stdout)
		}
		changes++
	}
	if changes == 0 || last.ReshardingID != "rs-2" || last.State == protocol.MigrationPreparing || last.State == protocol.MigrationRolledBack {
		t.Errorf("--json --wait: %d changes, last %+v; want rs-2 with its layout in use last:\n%s", changes, last, res.stdout)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestMissingCredentialsSaysHowToSignIn runs a command with no
// credentials and no saved login against the built server: the 401 line
// says how to give credentials; a wrong password gets no such hint (the
// credentials were given, they are wrong).
func TestMissingCredentialsSaysHowToSignIn(t *testing.T) {
	p := startProcess(t, t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("RSCOORD_USER", "")
	t.Setenv("RSCOORD_PASSWORD", "")
	t.Setenv("RSCOORD_TOKEN", "")
	ctx := context.Background()

	res := runCLI(ctx, "stream", "list", "--server", p.url)
	if res.code != exitError || !strings.Contains(res.stderr, "401 UNAUTHORIZED") {
		t.Fatalf("no credentials: %+v", res)
	}
	for _, want := range []string{"RSCOORD_USER", "RSCOORD_PASSWORD", "--token", "rscoord login"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("no credentials: stderr lacks %q: %s", want, res.stderr)
		}
	}
	if n := strings.Count(res.stderr, "\n"); n != 1 {
		t.Errorf("no credentials: %d lines on stderr, want one: %q", n, res.stderr)
	}
	res = runCLI(ctx, "stream", "list", "--json", "--server", p.url)
	var got jsonError
	if err := json.Unmarshal([]byte(res.stderr), &got); err != nil || got.HTTPStatus != 401 || !strings.Contains(got.Message, "rscoord login") {
		t.Errorf("no credentials, --json: %v %+v", err, got)
	}

	res = runCLI(ctx, "stream", "list", "--user", "admin", "--password", "wrong", "--server", p.url)
	if res.code != exitError || !strings.Contains(res.stderr, "401") || strings.Contains(res.stderr, "rscoord login") {
		t.Errorf("wrong password: %+v", res)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestScaleWaitWithoutGroups: --wait on a stream without groups says that
// there is nothing to follow the migration through, and how it goes on,
// instead of returning as if it had ended.
func TestScaleWaitWithoutGroups(t *testing.T) {
	p := startProcess(t, t.TempDir())
	cli := adminCLI(t, p.url)
	cli("stream", "create", "solo", "--shards", "2")
	if groups := cli("group", "list", "--json").stdout; strings.Contains(groups, `"solo"`) {
		cli("group", "delete", "solo", "solo", "--reason", "test", "--force")
	}
	res := cli("stream", "scale", "solo", "--to", "3", "--reason", "test", "--wait", "--poll", "50ms")
	if !strings.Contains(res.stdout, "--wait: stream solo has no consumer group to follow rs-1") ||
		!strings.Contains(res.stdout, "rscoord stream complete solo rs-1") {
		t.Fatalf("--wait without groups:\n%s", res.stdout)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// adminCLI runs CLI commands against url as the admin, with a config
// directory of the test's own, and fails the test on a command that does
// not exit 0.
func adminCLI(t *testing.T, url string) func(args ...string) cliResult {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("RSCOORD_USER", "admin")
	t.Setenv("RSCOORD_PASSWORD", testAdminPassword)
	return func(args ...string) cliResult {
		t.Helper()
		res := runCLI(context.Background(), append(args, "--server", url)...)
		if res.code != exitOK {
			t.Fatalf("%v: %+v", args, res)
		}
		return res
	}
}
