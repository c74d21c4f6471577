package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestStreamDeleteAgainstServer runs stream delete against the built
// server with Redis: refused while the stream has groups; with force and
// delete-keys it deletes the groups, the record and every shard key, and
// is audited; the prefix is then unknown and can be created anew.
func TestStreamDeleteAgainstServer(t *testing.T) {
	rdb := redistest.Standalone(t)
	p := startProcess(t, t.TempDir(), "--redis", rdb.Addr)
	cli := adminCLI(t, p.url)
	ctx := context.Background()

	cli("stream", "create", "orders", "--shards", "2", "--reason", "test")
	cli("group", "create", "orders", "billing", "--reason", "test")
	res := runCLI(ctx, "stream", "delete", "orders", "--server", p.url)
	if res.code != exitError || !strings.Contains(res.stderr, "STREAM_HAS_GROUPS") {
		t.Fatalf("delete with groups: %+v", res)
	}
	res = cli("stream", "delete", "orders", "--force", "--delete-keys", "--reason", "cleanup", "--json")
	var resp protocol.DeleteStreamResponse
	if err := json.Unmarshal([]byte(res.stdout), &resp); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	if !slices.Equal(resp.DeletedGroups, []string{"billing", "orders"}) || !slices.Equal(resp.DeletedKeys, []string{"orders:0", "orders:1"}) {
		t.Fatalf("forced delete answered %+v", resp)
	}
	if n := rdb.Client().Exists(ctx, "orders:0", "orders:1").Val(); n != 0 {
		t.Fatalf("%d shard keys left after --delete-keys", n)
	}
	res = runCLI(ctx, "stream", "delete", "orders", "--force", "--server", p.url)
	if res.code != exitError || !strings.Contains(res.stderr, "STREAM_NOT_FOUND") {
		t.Fatalf("delete of a deleted stream: %+v", res)
	}
	var page protocol.AuditPage
	res = cli("audit", "--limit", "2", "--json")
	if err := json.Unmarshal([]byte(res.stdout), &page); err != nil || len(page.Entries) != 2 {
		t.Fatalf("audit: %v\n%s", err, res.stdout)
	}
	e := page.Entries[1]
	if e.Operation != protocol.AuditDeleteStream || e.Reason != "cleanup" || e.Result.Outcome != protocol.AuditAccepted ||
		e.Requested.DeleteKeys == nil || !*e.Requested.DeleteKeys || e.Requested.Force == nil || !*e.Requested.Force {
		t.Fatalf("audit entry of the forced delete: %+v", e)
	}
	cli("stream", "create", "orders", "--shards", "3", "--reason", "again")
	if res := cli("stream", "list"); !strings.Contains(res.stdout, "orders") || !strings.Contains(res.stdout, "3") {
		t.Fatalf("stream list after the create anew:\n%s", res.stdout)
	}
	if g := rdb.Client().XInfoGroups(ctx, "orders:2").Val(); len(g) != 1 || g[0].Name != "orders" {
		t.Fatalf("orders:2 after the create anew holds %+v", g)
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
