package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordclient"
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

// TestClusterForcedOffsetsReset: in the cluster mode a forced reset asked
// of the replica that does not run the stream is forwarded to the one
// that does, and its answer comes back although the wait for a member's
// lease outlasts the owner timeout of forwarded calls (5 s).
func TestClusterForcedOffsetsReset(t *testing.T) {
	rdb := redistest.Standalone(t)
	c := newTestCluster(t)
	reps := map[string]*replicaProc{}
	for _, name := range []string{"r1", "r2"} {
		reps[name] = startReplica(t, c, name, freeLoopbackPort(t), "--redis", rdb.Addr, "--member-lease", "6s", "--rebalance-timeout", "2s")
	}
	asAdmin(t, reps["r1"].url).CreateStream("orders", 2)
	owner := ownerOf(t, reps["r1"].url, "orders", "orders", "")
	other := "r1"
	if owner == "r1" {
		other = "r2"
	}
	m := coordtest.NewMember("m1", "orders", "orders")
	if r := m.Beat(asMember(t, reps[owner].url)); r.Status != protocol.StatusOK || len(r.Assignment.AssignedShards) != 2 {
		t.Fatalf("join: %+v", r)
	}
	start := time.Now()
	var got protocol.OffsetsResetResponse
	asAdmin(t, reps[other].url).JSON(http.MethodPost, coordclient.OffsetsResetPath("orders", "orders"), protocol.OffsetsResetRequest{
		RequestedBy: "test", Reason: "replay", To: protocol.ResetToEarliest, Execute: true, Force: true,
	}, http.StatusOK, &got)
	took := time.Since(start)
	if !got.Executed || !slices.Equal(got.HandedOff, []string{"m1"}) {
		t.Fatalf("forced reset through %s = %+v, want executed with m1 handed off", other, got)
	}
	if took < 5*time.Second {
		t.Fatalf("the forced reset answered in %v, before m1's lease lapsed", took)
	}
	t.Logf("forwarded forced reset answered in %v", took)
}
