package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// import-reference reads groups stored the way the reference's Redis
// store writes them, prints its plan without changing anything, creates
// the groups with --execute (a scale-out in flight at its target count,
// every epoch and version above the reference's), refuses the stream
// whose scale-in is in flight, and finds the groups there on a second run.
// A member of the reference that switches over carrying its numbers is
// told to rejoin and then served; its version, further ahead of a group
// started at 1 than a metadata correction may move, would be refused.
func TestImportReference(t *testing.T) {
	rs := redistest.Standalone(t)
	rdb := rs.Client()
	ctx := context.Background()
	const prefix = "team:coord"
	for _, g := range []struct{ stream, group, json string }{
		{"orders", "billing", `{"streamPrefix":"orders","consumerGroup":"billing","schemaVersion":1,"groupEpoch":9,"metadataVersion":2500000,` +
			`"assignmentEpoch":9,"state":"STABLE","shardCount":8,"members":{"pod-0":{"memberId":"pod-0","memberName":"pod","state":"ACTIVE",` +
			`"memberEpoch":9,"metadataVersion":2500000,"runtimeMaxConcurrency":1,"activeConsumerWorkers":1,"currentAssignment":[{"shardIndex":0}],` +
			`"revoking":[],"lastHeartbeatAt":"2026-12-01T00:00:00Z"}},"targetAssignments":{"pod-0":[{"shardIndex":0}]},` +
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
	for _, want := range []string{"orders  billing  8", "scale-out m-1 (4→8, ACTIVE) in flight", "REFUSED", "migration m-2 (6→2, DRAINING) in flight", "dry run: nothing changed"} {
		if !strings.Contains(dry.stdout, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, dry.stdout)
		}
	}
	// Each group starts above the highest number of its reference record.
	for _, want := range [][]string{{"billing", "2500000/9", "2500000"}, {"orders", "12/3", "12"}} {
		found := false
		for line := range strings.Lines(dry.stdout) {
			if f := strings.Fields(line); len(f) > 5 && f[0] == "orders" && f[1] == want[0] {
				found = f[4] == want[1] && f[5] == want[2]
			}
		}
		if !found {
			t.Fatalf("dry run: orders/%s's row lacks reference %s, start above %s:\n%s", want[0], want[1], want[2], dry.stdout)
		}
	}
	if code, _ := admin.Do(http.MethodGet, protocol.BasePath+"/streams/orders/groups/billing", nil); code != http.StatusNotFound {
		t.Fatalf("the dry run created orders/billing: %d", code)
	}

	if res := run("--execute"); res.code != exitError || !strings.Contains(res.stdout, "created orders/billing (8 shards, versions above 2500000)") ||
		!strings.Contains(res.stdout, "created orders/orders (8 shards, versions above 12)") || strings.Contains(res.stdout, "created pay") {
		t.Fatalf("execute: exit %d:\n%s%s", res.code, res.stdout, res.stderr)
	}
	var g protocol.GroupResponse
	admin.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/billing", nil, http.StatusOK, &g)
	if g.ShardCount != 8 || g.GroupEpoch <= 2500000 || g.AssignmentEpoch <= 2500000 || g.MetadataVersion <= 2500000 {
		t.Fatalf("orders/billing: %d shards, epochs %d/%d, version %d; want 8 shards, all above 2500000",
			g.ShardCount, g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion)
	}
	admin.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &g)
	if g.GroupEpoch <= 12 || g.AssignmentEpoch <= 12 || g.MetadataVersion <= 12 {
		t.Fatalf("orders/orders: epochs %d/%d, version %d; want all above 12", g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion)
	}
	// The reference's pod-0 switches over as it was: its epoch, its
	// version, the shard it read.
	pod := coordtest.NewMember("pod-0", "orders", "billing")
	pod.Epoch, pod.Version, pod.Owned = 9, 2500000, []int{0}
	if resp := pod.Beat(admin); resp.Status != protocol.StatusUnknownMemberID {
		t.Fatalf("the reference's member carrying its numbers: %s %s, want UNKNOWN_MEMBER_ID (rejoin)", resp.Status, resp.Message)
	}
	for i := range 3 {
		resp := pod.Beat(admin)
		if resp.Status != protocol.StatusOK || resp.MemberEpoch <= 2500000 || resp.MetadataVersion <= 2500000 {
			t.Fatalf("heartbeat %d after the rejoin: %s epoch %d version %d, want OK above 2500000", i, resp.Status, resp.MemberEpoch, resp.MetadataVersion)
		}
	}
	if len(pod.Owned) != 8 {
		t.Fatalf("pod-0, alone in the group, reads %v, want all 8 shards", pod.Owned)
	}
	var routing protocol.ProducerRoutingResponse
	admin.JSON(http.MethodGet, coordclient.ProducerRoutingPath("orders", "billing"), nil, http.StatusOK, &routing)
	if routing.MetadataVersion <= 2500000 || routing.ShardCount != 8 {
		t.Fatalf("producer routing: version %d, %d shards; want above 2500000, 8", routing.MetadataVersion, routing.ShardCount)
	}
	// A floor that is negative, beyond 2^53−1 or not an integer is the
	// client's mistake: 400, saying which.
	for body, want := range map[string]string{
		`{"requestedBy":"t","versionFloor":-1}`:               "versionFloor -1 is outside 0..9007199254740991",
		`{"requestedBy":"t","versionFloor":9007199254740992}`: "versionFloor 9007199254740992 is outside",
		`{"requestedBy":"t","versionFloor":1.5}`:              `versionFloor\" must be int64, not number 1.5`,
	} {
		code, raw := admin.Do(http.MethodPost, protocol.BasePath+"/streams/fl/groups/fl", json.RawMessage(body))
		if code != http.StatusBadRequest || !strings.Contains(string(raw), want) {
			t.Fatalf("create with %s: %d %s, want 400 saying %q", body, code, raw, want)
		}
	}
	if code, _ := admin.Do(http.MethodGet, protocol.BasePath+"/streams/pay/groups/pay", nil); code != http.StatusNotFound {
		t.Fatalf("the refused stream pay was created: %d", code)
	}
	if again := run("--execute"); !strings.Contains(again.stdout, "exists") || strings.Contains(again.stdout, "created") {
		t.Fatalf("second run:\n%s%s", again.stdout, again.stderr)
	}
}
