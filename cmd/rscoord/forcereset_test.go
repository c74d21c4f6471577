package main

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestForcedOffsetsResetCommand: with a member holding the shards,
// offsets reset --force without --execute is a dry run naming the member;
// with --execute it waits for the member to let go (here its lease, as it
// stops heartbeating), resets, says who handed off, and is audited with
// force.
func TestForcedOffsetsResetCommand(t *testing.T) {
	rdb := redistest.Standalone(t)
	p := startProcess(t, t.TempDir(), "--redis", rdb.Addr, "--heartbeat-interval", "500ms", "--member-lease", "2s", "--rebalance-timeout", "2s")
	cli := adminCLI(t, p.url)
	ctx := context.Background()
	cli("stream", "create", "orders", "--shards", "2", "--reason", "test")
	if err := rdb.Client().XAdd(ctx, &redis.XAddArgs{Stream: "orders:1", Values: []any{"k", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	m := coordtest.NewMember("m1", "orders", "orders")
	if r := m.Beat(asAdmin(t, p.url)); r.Status != protocol.StatusOK || len(r.Assignment.AssignedShards) != 2 {
		t.Fatalf("join: %+v", r)
	}

	res := cli("offsets", "reset", "orders", "--stream", "orders", "--to-latest", "--force")
	if !strings.Contains(res.stdout, "Dry run: nothing changed") || !strings.Contains(res.stdout, "m1 would hand the shards off") {
		t.Fatalf("forced dry run:\n%s", res.stdout)
	}
	if g := rdb.Client().XInfoGroups(ctx, "orders:1").Val(); len(g) != 1 || g[0].LastDeliveredID != "0-0" {
		t.Fatalf("a dry run moved the group: %+v", g)
	}
	res = cli("offsets", "reset", "orders", "--stream", "orders", "--to-latest", "--execute", "--force", "--reason", "skip backlog")
	if !strings.Contains(res.stdout, "m1 handed the shards off first") {
		t.Fatalf("forced reset:\n%s", res.stdout)
	}
	last := rdb.Client().XInfoStream(ctx, "orders:1").Val().LastGeneratedID
	if g := rdb.Client().XInfoGroups(ctx, "orders:1").Val(); len(g) != 1 || g[0].LastDeliveredID != last {
		t.Fatalf("after the forced reset the group is %+v, want at %s", g, last)
	}
	if res := cli("audit", "--limit", "1", "--json"); !strings.Contains(res.stdout, "RESET_OFFSETS") || !strings.Contains(strings.ReplaceAll(res.stdout, " ", ""), `"force":true`) {
		t.Fatalf("audit lacks the forced reset:\n%s", res.stdout)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
