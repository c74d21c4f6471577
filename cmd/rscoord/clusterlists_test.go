package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/cluster/replica"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// listGroups is GET /monitoring/groups of the replica at url as the
// bootstrap admin, and how long the answer took.
func listGroups(t *testing.T, url string) (protocol.GroupsResponse, time.Duration) {
	t.Helper()
	start := time.Now()
	status, _, raw := get(t, url+protocol.BasePath+"/monitoring/groups")
	took := time.Since(start)
	var resp protocol.GroupsResponse
	if status != http.StatusOK || json.Unmarshal(raw, &resp) != nil {
		t.Fatalf("groups of %s: %d %s", url, status, raw)
	}
	return resp, took
}

// groupNames are the stream/group names of a list.
func groupNames(resp protocol.GroupsResponse) []string {
	var out []string
	for _, g := range resp.Groups {
		out = append(out, g.StreamPrefix+"/"+g.ConsumerGroup)
	}
	return out
}

// Three replicas run six streams between them: asked any replica, the
// lists (groups, health, the Grafana rows and options) show the whole
// cluster. A replica SIGKILLed is named missing at once, with the streams
// it held, and the rest is listed; once its streams moved the lists are
// whole again; a replica frozen (SIGSTOP) is named missing after the
// fan-out's bound, not waited for.
func TestClusterWideLists(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	reps := map[string]*replicaProc{}
	for _, name := range []string{"r1", "r2", "r3"} {
		reps[name] = startReplica(t, c, name, freeLoopbackPort(t))
	}
	names := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	var all []string
	for i, n := range names {
		asAdmin(t, reps[[]string{"r1", "r2", "r3"}[i%3]].url).CreateStream(n, 2)
		all = append(all, n+"/"+n)
	}
	owners := awaitPlacement(t, reps["r1"].url, names, "")
	byOwner := map[string][]string{}
	for _, n := range names {
		byOwner[owners[n+"/"+n]] = append(byOwner[owners[n+"/"+n]], "stream/"+n)
	}
	if len(byOwner) < 2 {
		t.Fatalf("every stream runs on one replica: %v", byOwner)
	}
	t.Logf("placement: %v", byOwner)

	// Every replica lists every group, whoever runs it.
	for name, r := range reps {
		resp, _ := listGroups(t, r.url)
		if got := groupNames(resp); !slices.Equal(got, all) || len(resp.MissingReplicas) != 0 {
			t.Fatalf("groups through %s: %v, missing %+v; want %v", name, got, resp.MissingReplicas, all)
		}
		status, hdr, raw := get(t, r.url+protocol.BasePath+"/monitoring/grafana/groups")
		var rows []struct {
			StreamPrefix string `json:"streamPrefix"`
		}
		if status != http.StatusOK || json.Unmarshal(raw, &rows) != nil || len(rows) != len(names) || hdr.Get(protocol.MissingReplicasHeader) != "" {
			t.Fatalf("grafana groups through %s: %d %s %s", name, status, hdr.Get(protocol.MissingReplicasHeader), raw)
		}
		status, _, raw = get(t, r.url+protocol.BasePath+"/monitoring/grafana/options/streams?consumerGroup=s4")
		if status != http.StatusOK || string(raw) != `[{"__text":"s4","__value":"s4"}]`+"\n" {
			t.Fatalf("grafana stream options of group s4 through %s: %d %s", name, status, raw)
		}
		status, _, raw = get(t, r.url+protocol.BasePath+"/monitoring/grafana/messages?streamPrefix=s1&shard=0")
		if status != http.StatusServiceUnavailable || !strings.Contains(string(raw), "REDIS_NOT_CONFIGURED") {
			t.Fatalf("grafana messages of s1 through %s (no --redis): %d %s", name, status, raw)
		}
		var h protocol.Health
		status, _, raw = get(t, r.url+protocol.BasePath+"/monitoring/health")
		if status != http.StatusOK || json.Unmarshal(raw, &h) != nil || h.Status != protocol.HealthUp || len(h.Replicas) != 3 || h.Replicas[0].ID != name {
			t.Fatalf("health through %s: %d %s", name, status, raw)
		}
	}
	// Without credentials nothing is asked of anyone: 401 as on one server.
	resp, err := http.Get(reps["r1"].url + protocol.BasePath + "/monitoring/groups")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("groups without credentials: %d", resp.StatusCode)
	}

	// SIGKILL of a replica that runs streams: named missing at once, with
	// the streams whose groups are missing; the others' groups are listed.
	victim := owners["s0/s0"]
	var survivors []string
	for _, name := range []string{"r1", "r2", "r3"} {
		if name != victim {
			survivors = append(survivors, name)
		}
	}
	if err := reps[victim].proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = reps[victim].proc.Wait(10 * time.Second)
	partial, took := listGroups(t, reps[survivors[0]].url)
	if len(partial.MissingReplicas) != 1 || partial.MissingReplicas[0].ID != victim ||
		!slices.Equal(partial.MissingReplicas[0].Units, byOwner[victim]) || partial.MissingReplicas[0].Error == "" {
		t.Fatalf("groups %v after the SIGKILL of %s: missing %+v", took, victim, partial.MissingReplicas)
	}
	if took > time.Second {
		t.Fatalf("groups after the SIGKILL of %s took %v", victim, took)
	}
	if got, want := len(partial.Groups), len(names)-len(byOwner[victim]); got != want {
		t.Fatalf("groups after the SIGKILL of %s: %v, want the %d of the others", victim, groupNames(partial), want)
	}
	var h protocol.Health
	status, _, raw := get(t, reps[survivors[0]].url+protocol.BasePath+"/monitoring/health")
	if status != http.StatusOK || json.Unmarshal(raw, &h) != nil || h.Status != protocol.HealthDegraded ||
		!slices.ContainsFunc(h.Replicas, func(r protocol.ReplicaHealth) bool { return r.ID == victim && r.Status == protocol.HealthDown }) {
		t.Fatalf("health after the SIGKILL of %s: %d %s", victim, status, raw)
	}
	res := runCLI(t.Context(), "group", "list", "--server", reps[survivors[1]].url, "--user", "admin", "--password", credtest.AdminPassword)
	if res.code != 0 || !strings.Contains(res.stdout, "Incomplete: replica "+victim+" (") || !strings.Contains(res.stdout, byOwner[victim][0]) {
		t.Fatalf("rscoord group list after the SIGKILL of %s: %d\n%s%s", victim, res.code, res.stdout, res.stderr)
	}
	t.Logf("after the SIGKILL of %s: groups answered in %v, missing %+v", victim, took, partial.MissingReplicas)

	// Its streams move to the others: whole again, through either.
	var whole protocol.GroupsResponse
	if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		whole, _ = listGroups(t, reps[survivors[1]].url)
		return slices.Equal(groupNames(whole), all) && len(whole.MissingReplicas) == 0
	}) {
		t.Fatalf("groups not whole again after the SIGKILL of %s: %v missing %+v", victim, groupNames(whole), whole.MissingReplicas)
	}

	// A frozen replica is not waited for: named missing after the bound.
	frozen, asked := reps[survivors[0]], reps[survivors[1]]
	if err := frozen.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	partial, took = listGroups(t, asked.url)
	if err := frozen.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = frozen.proc.Wait(10 * time.Second)
	if len(partial.MissingReplicas) != 1 || partial.MissingReplicas[0].ID != survivors[0] ||
		!strings.Contains(partial.MissingReplicas[0].Error, "within") || took > replica.FanOutTimeout+time.Second {
		t.Fatalf("groups %v after the SIGSTOP of %s: missing %+v", took, survivors[0], partial.MissingReplicas)
	}
	t.Logf("after the SIGSTOP of %s: groups answered in %v, missing %+v", survivors[0], took, partial.MissingReplicas)
	if err := asked.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := asked.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, asked.proc.Output())
	}
}
