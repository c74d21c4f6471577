package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// postCreate posts a stream creation and returns the status, Retry-After
// and error body, without failing on a 503.
func postCreate(t *testing.T, base, prefix string) (int, string, protocol.ErrorBody) {
	t.Helper()
	body, _ := json.Marshal(protocol.CreateRequest{RequestedBy: "test", Reason: "etcd failures"})
	cli := http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodPost, base+protocol.BasePath+"/streams/"+prefix, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", credtest.AdminAuth())
	resp, err := cli.Do(req)
	if err != nil {
		t.Fatalf("POST stream %s to %s: %v", prefix, base, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb protocol.ErrorBody
	_ = json.Unmarshal(raw, &eb)
	return resp.StatusCode, resp.Header.Get("Retry-After"), eb
}

// beatFor heartbeats every member through every server for d, and fails
// on any answer that is not a 200 with OK or RETRY; it returns how many
// RETRY answers it got.
func beatFor(t *testing.T, d time.Duration, servers []*coordtest.Server, members ...*coordtest.Member) (retries int) {
	t.Helper()
	// The ticker paces the members' heartbeats, as their interval would.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		for i, m := range members {
			hb, err := tryBeat(servers[i%len(servers)], m)
			if err != nil {
				t.Fatalf("heartbeat of %s: %v", m.ID, err)
			}
			switch hb.Status {
			case protocol.StatusOK:
			case protocol.StatusRetry:
				retries++
			default:
				t.Fatalf("heartbeat of %s: %+v", m.ID, hb)
			}
		}
	}
	return retries
}

// The etcd cluster under the replicas fails: one member killed, the
// service goes on; quorum lost, heartbeats are answered RETRY and admin
// calls 503 with Retry-After through every replica; quorum back, the
// service resumes with every acknowledged change and the members' shards.
func TestClusterEtcdFailures(t *testing.T) {
	t.Parallel()
	c := newOwnTestCluster(t)
	r1 := startReplica(t, c, "r1", freeLoopbackPort(t))
	r2 := startReplica(t, c, "r2", freeLoopbackPort(t))
	servers := []*coordtest.Server{asMember(t, r1.url), asMember(t, r2.url)}
	asAdmin(t, servers[0].URL).CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	coordtest.Converge(t, servers[0], 6, a, b)
	var before protocol.GroupResponse
	asAdmin(t, servers[1].URL).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &before)

	// One etcd member (not the leader) dies: nothing changes for clients.
	ctx := context.Background()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower *etcdtest.Member
	for _, m := range c.Members {
		if m != leader && follower == nil {
			follower = m
		}
	}
	if err := follower.Kill(); err != nil {
		t.Fatal(err)
	}
	if n := beatFor(t, 4*time.Second, servers, a, b); n > 0 {
		t.Logf("%d RETRY answers after one etcd member died", n)
	}
	if status, _, eb := postCreate(t, r2.url, "payments"); status != http.StatusCreated {
		t.Fatalf("create with one etcd member down: %d %+v", status, eb)
	}
	awaitOK(t, servers[0], a, 5*time.Second)
	awaitOK(t, servers[1], b, 5*time.Second)
	coordtest.CheckNoOverlap(t, a, b)
	ownedA, ownedB := slices.Clone(a.Owned), slices.Clone(b.Owned)

	// A second one dies: no quorum. Within the replicas' lease (2 s) every
	// answer is RETRY or 503; none is an error or a decision made on state
	// that could not be written.
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	// Past the lease every answer must be RETRY: until then the members
	// go on heartbeating, and no answer may be an error.
	beatFor(t, 3*time.Second, servers, a, b)
	for _, s := range servers {
		for _, m := range []*coordtest.Member{a, b} {
			hb, err := tryBeat(s, m)
			if err != nil || hb.Status != protocol.StatusRetry {
				t.Fatalf("heartbeat of %s through %s %v after quorum loss: %+v %v", m.ID, s.URL, time.Since(lost), hb, err)
			}
		}
		status, retryAfter, eb := postCreate(t, s.URL, "refunds")
		if status != http.StatusServiceUnavailable || retryAfter == "" || eb.ErrorCode == "" {
			t.Fatalf("admin call through %s without quorum: %d Retry-After %q %+v", s.URL, status, retryAfter, eb)
		}
	}
	beatFor(t, 2*time.Second, servers, a, b)

	// Quorum returns: the service resumes, with what was acknowledged.
	back := time.Now()
	for _, m := range []*etcdtest.Member{follower, leader} {
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	took := awaitOK(t, servers[0], a, 30*time.Second)
	t.Logf("quorum lost for %v; first OK heartbeat %v after the etcd members restarted", back.Sub(lost), took)
	awaitOK(t, servers[1], b, 10*time.Second)
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
		t.Fatalf("ownership moved: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
	}
	var after protocol.GroupResponse
	asAdmin(t, servers[1].URL).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &after)
	if after.GroupEpoch < before.GroupEpoch || after.AssignmentEpoch < before.AssignmentEpoch || after.MetadataVersion < before.MetadataVersion {
		t.Fatalf("epochs went back:\n before %+v\n after  %+v", before, after)
	}
	// Both replicas joined again after the quorum loss; the one that came
	// back first may have claimed payments and still be handing it to the
	// one placement names: 503 with Retry-After meanwhile, as documented.
	var status int
	var raw []byte
	if !poll.Wait(20*time.Second, 100*time.Millisecond, func() bool {
		status, raw = asAdmin(t, servers[0].URL).Do(http.MethodGet, protocol.BasePath+"/streams/payments/groups/payments", nil)
		if status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Fatalf("GET the group payments after quorum came back: %d %s", status, raw)
		}
		return status == http.StatusOK
	}) {
		t.Fatalf("GET the group payments after quorum came back: %d %s", status, raw)
	}
	for _, r := range []*replicaProc{r1, r2} {
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*replicaProc{r1, r2} {
		if err := r.proc.Wait(20 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, r.proc.Output())
		}
	}
}
