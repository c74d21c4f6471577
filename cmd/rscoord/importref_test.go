package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// import-reference reads groups stored the way the reference's Redis
// store writes them, prints its plan without changing anything, creates
// the groups with --execute (a scale-out in flight at its target count),
// refuses the stream whose scale-in is in flight, and finds the groups
// there on a second run.
func TestImportReference(t *testing.T) {
	rs := redistest.Standalone(t)
	rdb := rs.Client()
	ctx := context.Background()
	const prefix = "team:coord"
	for _, g := range []struct{ stream, group, json string }{
		{"orders", "billing", `{"streamPrefix":"orders","consumerGroup":"billing","schemaVersion":1,"groupEpoch":9,"metadataVersion":30,` +
			`"assignmentEpoch":9,"state":"STABLE","shardCount":8,"members":{},"targetAssignments":{},` +
			`"migrations":{"m-1":{"reshardingId":"m-1","fromShardCount":4,"toShardCount":8,"state":"ACTIVE"}},"activeReshardingId":"m-1"}`},
		{"orders", "orders", `{"streamPrefix":"orders","consumerGroup":"orders","schemaVersion":1,"groupEpoch":3,"metadataVersion":12,` +
			`"assignmentEpoch":3,"state":"EMPTY","shardCount":8,"members":{},"targetAssignments":{},"migrations":{}}`},
		{"pay", "pay", `{"streamPrefix":"pay","consumerGroup":"pay","schemaVersion":1,"groupEpoch":3,"metadataVersion":12,` +
			`"assignmentEpoch":3,"state":"STABLE","shardCount":2,"migrations":{"m-2":{"reshardingId":"m-2","fromShardCount":6,"toShardCount":2,"state":"DRAINING"}}}`},
	} {
		key := prefix + ":{" + g.stream + ":" + g.group + "}:metadata"
		if err := rdb.HSet(ctx, key, "aggregate", g.json, "revision", "2", "schemaVersion", "1", "layoutVersion", "1", "updatedAt", "2026-12-01T00:00:00Z").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.SAdd(ctx, prefix+":groups", key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	p := startProcess(t, filepath.Join(t.TempDir(), "data"))
	admin := coordtest.Remote(t, p.url).As(coordtest.Basic("admin", testAdminPassword))
	run := func(extra ...string) cliResult {
		args := append([]string{"import-reference", "--redis", rs.Addr, "--key-prefix", prefix, "--server", p.url,
			"--user", "admin", "--password", testAdminPassword}, extra...)
		return runCLI(ctx, args...)
	}

	dry := run()
	if dry.code != exitError || !strings.Contains(dry.stderr, "some streams were not imported") {
		t.Fatalf("dry run: exit %d: %s", dry.code, dry.stderr)
	}
	for _, want := range []string{"orders  billing  8", "scale-out m-1 (4→8, ACTIVE) in flight", "30/9", "REFUSED", "migration m-2 (6→2, DRAINING) in flight", "dry run: nothing changed"} {
		if !strings.Contains(dry.stdout, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, dry.stdout)
		}
	}
	if code, _ := admin.Do(http.MethodGet, protocol.BasePath+"/streams/orders/groups/billing", nil); code != http.StatusNotFound {
		t.Fatalf("the dry run created orders/billing: %d", code)
	}

	if res := run("--execute"); res.code != exitError || !strings.Contains(res.stdout, "created orders/billing (8 shards)") ||
		!strings.Contains(res.stdout, "created orders/orders (8 shards)") || strings.Contains(res.stdout, "created pay") {
		t.Fatalf("execute: exit %d:\n%s%s", res.code, res.stdout, res.stderr)
	}
	var g protocol.GroupResponse
	admin.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/billing", nil, http.StatusOK, &g)
	if g.ShardCount != 8 {
		t.Fatalf("orders/billing has %d shards, want 8", g.ShardCount)
	}
	if code, _ := admin.Do(http.MethodGet, protocol.BasePath+"/streams/pay/groups/pay", nil); code != http.StatusNotFound {
		t.Fatalf("the refused stream pay was created: %d", code)
	}
	if again := run("--execute"); !strings.Contains(again.stdout, "exists") || strings.Contains(again.stdout, "created") {
		t.Fatalf("second run:\n%s%s", again.stdout, again.stderr)
	}
}
