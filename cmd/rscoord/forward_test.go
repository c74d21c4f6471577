package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// get is one GET as the bootstrap admin; it fails the test on a refused
// connection.
func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	cli := http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", credtest.AdminAuth())
	resp, err := cli.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// Three replicas: members and operators given any replica's URL are
// served, the others forwarding to the replica that runs the group;
// /monitoring/cluster and /readyz show who runs what; right after that
// replica's SIGKILL the others answer heartbeats RETRY (never an error)
// and admin calls 503 with Retry-After until the new owner serves.
func TestClusterForwarding(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	reps := map[string]*replicaProc{}
	for _, name := range []string{"r1", "r2", "r3"} {
		reps[name] = startReplica(t, c, name, freeLoopbackPort(t))
	}
	asAdmin(t, reps["r2"].url).CreateStream("orders", 4)
	owner := ownerOf(t, reps["r2"].url, "orders", "orders", "")
	var others []string
	for _, name := range []string{"r1", "r2", "r3"} {
		if name != owner {
			others = append(others, name)
		}
	}
	sa, sb := asMember(t, reps[others[0]].url), asMember(t, reps[others[1]].url)

	// Heartbeats through the replicas that do not run the group.
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(sa)
	b.Beat(sb)
	coordtest.Converge(t, sb, 6, a, b)
	if hb, via, err := tryBeatVia(sa, a); err != nil || hb.Status != protocol.StatusOK || via != others[0] {
		t.Fatalf("heartbeat through %s: %+v via %q, %v", others[0], hb, via, err)
	}
	if _, via, err := tryBeatVia(asMember(t, reps[owner].url), a); err != nil || via != "" {
		t.Fatalf("heartbeat to the owner: forwarded by %q, %v", via, err)
	}
	coordtest.CheckNoOverlap(t, a, b)
	ownedA, ownedB := slices.Clone(a.Owned), slices.Clone(b.Owned)

	// Every replica is ready and gives the same view of who runs what.
	for _, r := range reps {
		if status, _, raw := get(t, r.url+"/readyz"); status != http.StatusOK {
			t.Fatalf("%s /readyz: %d %s", r.url, status, raw)
		}
	}
	status, _, raw := get(t, reps[others[1]].url+protocol.BasePath+"/monitoring/cluster")
	var view protocol.ClusterResponse
	if status != http.StatusOK || json.Unmarshal(raw, &view) != nil {
		t.Fatalf("cluster view: %d %s", status, raw)
	}
	if view.Self.ID != others[1] || len(view.Replicas) != 3 {
		t.Fatalf("cluster view of %s: %s", others[1], raw)
	}
	for _, r := range view.Replicas {
		wantRole, wantUnits, wantGroups := protocol.RoleStandby, []string{}, 0
		if r.ID == owner {
			wantRole, wantUnits, wantGroups = protocol.RoleOwner, []string{"stream/orders"}, 1
		}
		if !r.Live || r.Role != wantRole || !slices.Equal(r.Units, wantUnits) || r.GroupsOwned != wantGroups {
			t.Fatalf("replica %+v in %s", r, raw)
		}
	}
	if !slices.Contains(view.Groups, protocol.ClusterGroup{StreamPrefix: "orders", ConsumerGroup: "orders", Owner: owner, OwnerURL: reps[owner].url}) {
		t.Fatalf("groups of the view: %s", raw)
	}
	// The gauges are refreshed every second.
	if !poll.Wait(20*time.Second, 100*time.Millisecond, func() bool {
		status, _, raw = get(t, reps[owner].url+"/metrics")
		return status == http.StatusOK && strings.Contains(string(raw), "rscoord_cluster_replicas_live 3") &&
			strings.Contains(string(raw), "rscoord_cluster_groups_unowned 0") &&
			!strings.Contains(string(raw), "rscoord_cluster_forwarded_requests_total 0") &&
			strings.Contains(string(raw), "rscoord_cluster_forwarded_requests_total") &&
			strings.Contains(string(raw), `rscoord_cluster_placement_moves_total{direction="claimed"} 1`)
	}) {
		t.Fatalf("metrics of the owner: %d, cluster series missing:\n%s", status, grepLines(raw, "rscoord_cluster"))
	}

	// The owner dies. Its owner key lives on for up to its lease (2 s):
	// the others cannot reach it and say so the protocol's way.
	if err := reps[owner].proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	body, _ := json.Marshal(protocol.CreateRequest{RequestedBy: "test", Reason: "during failover"})
	req, err := http.NewRequest(http.MethodPost, reps[others[1]].url+protocol.BasePath+"/streams/orders/groups/audit", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", credtest.AdminAuth())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb protocol.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		json.Unmarshal(raw, &eb) != nil || eb.ErrorCode != protocol.CodeReplicaNotOwner {
		t.Fatalf("admin call %v after the owner's SIGKILL: %d Retry-After %q %s", time.Since(killed), resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	var statuses []protocol.Status
	poll.Wait(time.Until(killed.Add(15*time.Second)), 50*time.Millisecond, func() bool {
		hb, _, err := tryBeatVia(sa, a)
		if err != nil {
			t.Fatalf("heartbeat through %s %v after the owner's SIGKILL: %v", others[0], time.Since(killed), err)
		}
		statuses = append(statuses, hb.Status)
		if hb.Status == protocol.StatusOK {
			return true
		}
		if hb.Status != protocol.StatusRetry || hb.HeartbeatIntervalMs <= 0 {
			t.Fatalf("heartbeat through %s during failover: %+v", others[0], hb)
		}
		return false
	})
	if !slices.Contains(statuses, protocol.StatusRetry) || statuses[len(statuses)-1] != protocol.StatusOK {
		t.Fatalf("statuses through %s after the owner's SIGKILL: %v", others[0], statuses)
	}
	t.Logf("through another replica: first OK heartbeat %v after the owner's SIGKILL (%d RETRY before)", time.Since(killed), len(statuses)-1)
	awaitOK(t, sb, b, 5*time.Second)
	awaitOK(t, sa, a, 5*time.Second)
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
		t.Fatalf("ownership moved: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
	}
	asAdmin(t, sb.URL).CreateStream("payments", 2)
	for _, name := range others {
		if err := reps[name].proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range others {
		if err := reps[name].proc.Wait(20 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, reps[name].proc.Output())
		}
	}
}

// grepLines returns the lines of raw that contain s.
func grepLines(raw []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
