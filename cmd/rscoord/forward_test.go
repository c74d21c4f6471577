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
	"github.com/rscoord/rscoord/internal/coordtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
)

// get is one GET without failing on a refused connection.
func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	cli := http.Client{Timeout: 5 * time.Second}
	resp, err := cli.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// Three replicas: members and operators given any replica's URL are
// served, the stand-bys forwarding to the owner; /monitoring/cluster and
// /readyz show who owns the coordinator; right after the owner's SIGKILL
// the stand-bys answer heartbeats RETRY (never an error) and admin calls
// 503 with Retry-After until the new owner serves, through every URL.
func TestClusterForwarding(t *testing.T) {
	c := etcdtest.NewCluster(t)
	r1, owner := startReplica(t, c, "r1", freeLoopbackPort(t))
	if !owner {
		t.Fatalf("first replica stands by:\n%s", r1.proc.Output())
	}
	r2, _ := startReplica(t, c, "r2", freeLoopbackPort(t))
	r3, _ := startReplica(t, c, "r3", freeLoopbackPort(t))
	s2, s3 := coordtest.Remote(t, r2.url), coordtest.Remote(t, r3.url)

	// An admin call and heartbeats through stand-bys.
	s2.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s2)
	b.Beat(s3)
	coordtest.Converge(t, s3, 6, a, b)
	if hb, via, err := tryBeatVia(s2, a); err != nil || hb.Status != protocol.StatusOK || via != "r2" {
		t.Fatalf("heartbeat through r2: %+v via %q, %v", hb, via, err)
	}
	if _, via, err := tryBeatVia(coordtest.Remote(t, r1.url), a); err != nil || via != "" {
		t.Fatalf("heartbeat to the owner: forwarded by %q, %v", via, err)
	}
	coordtest.CheckNoOverlap(t, a, b)
	ownedA, ownedB := slices.Clone(a.Owned), slices.Clone(b.Owned)

	// Every replica is ready; the cluster view through a stand-by is the
	// owner's, the header names the stand-by.
	for _, r := range []*replicaProc{r1, r2, r3} {
		if status, _, raw := get(t, r.url+"/readyz"); status != http.StatusOK {
			t.Fatalf("%s /readyz: %d %s", r.url, status, raw)
		}
	}
	status, hdr, raw := get(t, r3.url+protocol.BasePath+"/monitoring/cluster")
	var view protocol.ClusterResponse
	if status != http.StatusOK || json.Unmarshal(raw, &view) != nil {
		t.Fatalf("cluster view: %d %s", status, raw)
	}
	if hdr.Get(forwardedByHeader) != "r3" || view.Self.ID != "r1" || view.Self.Role != protocol.RoleOwner || len(view.Replicas) != 3 {
		t.Fatalf("cluster view via r3 (header %q): %s", hdr.Get(forwardedByHeader), raw)
	}
	for _, r := range view.Replicas {
		wantRole, wantUnits := protocol.RoleStandby, 0
		if r.ID == "r1" {
			wantRole, wantUnits = protocol.RoleOwner, 1
		}
		if !r.Live || r.Role != wantRole || len(r.Units) != wantUnits {
			t.Fatalf("replica %+v in %s", r, raw)
		}
	}
	if !slices.Contains(view.Groups, protocol.ClusterGroup{StreamPrefix: "orders", ConsumerGroup: "orders", Owner: "r1", OwnerURL: r1.url}) {
		t.Fatalf("groups of the view: %s", raw)
	}
	status, _, raw = get(t, r2.url+"/metrics")
	if status != http.StatusOK || !strings.Contains(string(raw), "rscoord_cluster_replicas_live 3") ||
		!strings.Contains(string(raw), "rscoord_cluster_groups_unowned 0") ||
		strings.Contains(string(raw), "rscoord_cluster_forwarded_requests_total 0") ||
		!strings.Contains(string(raw), "rscoord_cluster_forwarded_requests_total") {
		t.Fatalf("metrics through r2: %d, cluster gauges missing:\n%s", status, grepLines(raw, "rscoord_cluster"))
	}

	// The owner dies. Its owner key lives on for up to its lease (2 s):
	// the stand-bys cannot reach it and say so the protocol's way.
	if err := r1.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	body, _ := json.Marshal(protocol.CreateRequest{RequestedBy: "test", Reason: "during failover"})
	resp, err := http.Post(r3.url+protocol.BasePath+"/streams/payments", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb protocol.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		json.Unmarshal(raw, &eb) != nil || eb.ErrorCode != protocol.CodeStoreUnavailable {
		t.Fatalf("admin call %v after the owner's SIGKILL: %d Retry-After %q %s", time.Since(killed), resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	var statuses []protocol.Status
	for time.Since(killed) < 15*time.Second {
		hb, _, err := tryBeatVia(s2, a)
		if err != nil {
			t.Fatalf("heartbeat through r2 %v after the owner's SIGKILL: %v", time.Since(killed), err)
		}
		statuses = append(statuses, hb.Status)
		if hb.Status == protocol.StatusOK {
			break
		}
		if hb.Status != protocol.StatusRetry || hb.HeartbeatIntervalMs <= 0 {
			t.Fatalf("heartbeat through r2 during failover: %+v", hb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.Contains(statuses, protocol.StatusRetry) || statuses[len(statuses)-1] != protocol.StatusOK {
		t.Fatalf("statuses through r2 after the owner's SIGKILL: %v", statuses)
	}
	t.Logf("through a stand-by: first OK heartbeat %v after the owner's SIGKILL (%d RETRY before)", time.Since(killed), len(statuses)-1)
	awaitOK(t, s3, b, 5*time.Second)
	awaitOK(t, s2, a, 5*time.Second)
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
		t.Fatalf("ownership moved: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
	}
	s3.CreateStream("payments", 2)
	for _, r := range []*replicaProc{r2, r3} {
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*replicaProc{r2, r3} {
		if err := r.proc.Wait(20 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, r.proc.Output())
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
