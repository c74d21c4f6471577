package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestOperatorCommandsAgainstServer runs the lifecycle commands against
// the built server with Redis: offsets reset plans, then applies; group
// delete takes the group off every shard key, those of an active
// scale-out included; and stream list still shows the stream, now
// without groups, with its migration.
func TestOperatorCommandsAgainstServer(t *testing.T) {
	rdb := redistest.Standalone(t)
	p := startProcess(t, t.TempDir(), "--redis", rdb.Addr)
	cli := adminCLI(t, p.url)
	ctx := context.Background()

	cli("stream", "create", "orders", "--shards", "2", "--reason", "test")
	for range 3 {
		if err := rdb.Client().XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"k", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	res := cli("offsets", "reset", "orders", "--stream", "orders", "--to-latest")
	if !strings.Contains(res.stdout, "Dry run: nothing changed") || !strings.Contains(res.stdout, "NEW LAST DELIVERED") {
		t.Fatalf("dry run:\n%s", res.stdout)
	}
	if g := rdb.Client().XInfoGroups(ctx, "orders:0").Val(); len(g) != 1 || g[0].LastDeliveredID != "0-0" {
		t.Fatalf("a dry run moved the group: %+v", g)
	}
	res = runCLI(ctx, "offsets", "reset", "orders", "--stream", "orders", "--to-latest", "--to-earliest", "--server", p.url)
	if res.code != exitError || !strings.Contains(res.stderr, "give one of them") {
		t.Fatalf("two targets: %+v", res)
	}
	res = cli("offsets", "reset", "orders", "--stream", "orders", "--to-latest", "--shard", "0", "--execute", "--reason", "skip backlog", "--json")
	var reset protocol.OffsetsResetResponse
	if err := json.Unmarshal([]byte(res.stdout), &reset); err != nil || !reset.Executed || len(reset.Shards) != 1 {
		t.Fatalf("execute: %v %+v", err, res)
	}
	last := rdb.Client().XInfoStream(ctx, "orders:0").Val().LastGeneratedID
	if g := rdb.Client().XInfoGroups(ctx, "orders:0").Val(); len(g) != 1 || g[0].LastDeliveredID != last {
		t.Fatalf("after the reset the group is %+v, want at %s", g, last)
	}
	// The offsets command without a subcommand still shows them.
	if res := cli("offsets", "orders", "orders"); !strings.Contains(res.stdout, last) {
		t.Fatalf("offsets after the reset:\n%s", res.stdout)
	}
	if res := cli("audit", "--limit", "1"); !strings.Contains(res.stdout, "RESET_OFFSETS") {
		t.Fatalf("audit lacks the reset:\n%s", res.stdout)
	}

	res = cli("stream", "scale", "orders", "--to", "3", "--reason", "test")
	if !strings.Contains(res.stdout, "ACTIVE") {
		t.Fatalf("scale-out is not ACTIVE:\n%s", res.stdout)
	}
	cli("group", "delete", "orders", "orders", "--reason", "test")
	for i := range 3 {
		key := protocol.StreamKey("orders", i)
		if g := rdb.Client().XInfoGroups(ctx, key).Val(); len(g) != 0 {
			t.Errorf("%s after group delete holds %+v", key, g)
		}
	}
	res = cli("stream", "list")
	if !strings.Contains(res.stdout, "orders") || !strings.Contains(res.stdout, "ACTIVE") {
		t.Fatalf("stream list lacks the stream without groups and its migration:\n%s", res.stdout)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestHelpListsLifecycleCommands: the top-level help names offsets reset
// and stream delete.
func TestHelpListsLifecycleCommands(t *testing.T) {
	res := runCLI(context.Background(), "--help")
	for _, want := range []string{"offsets reset", "stream delete"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("rscoord --help lacks %q:\n%s", want, res.stdout)
		}
	}
}
