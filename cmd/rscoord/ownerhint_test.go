package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// forwardedTo is how many requests other replicas forwarded to the
// replica at url while its coordinator runs.
func forwardedTo(t *testing.T, url string) float64 {
	t.Helper()
	return gaugeValue(scrapeMetrics(t, asAdmin(t, url)), "rscoord_cluster_forwarded_requests_total", nil)
}

// Three replicas on a real etcd: a client given every replica's URL, a
// stand-by's first, heartbeats the stream's owner directly from its
// second call on (the first answer, forwarded, names the owner); once
// that owner is SIGKILLed it moves on at the connection error and then
// follows the new owner's hint, and is not forwarded again.
func TestClusterClientsFollowOwnerHint(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	reps := map[string]*replicaProc{}
	for _, name := range []string{"r1", "r2", "r3"} {
		reps[name] = startReplica(t, c, name, freeLoopbackPort(t))
	}
	asAdmin(t, reps["r1"].url).CreateStream("orders", 4)
	owner := ownerOf(t, reps["r1"].url, "orders", "orders", "")
	var urls []string // the stand-bys first, the owner last
	for _, name := range []string{"r1", "r2", "r3"} {
		if name != owner {
			urls = append(urls, reps[name].url)
		}
	}
	urls = append(urls, reps[owner].url)
	cc, err := coordclient.New(urls, coordclient.Options{Authorization: credtest.MemberAuth(), Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.CloseIdleConnections()
	ctx := context.Background()
	m := coordtest.NewMember("a", "orders", "orders")
	beat := func() (protocol.HeartbeatResponse, error) {
		req := m.Request()
		hb, err := cc.Heartbeat(ctx, "orders", "orders", &req)
		if err == nil {
			m.Apply(req, hb)
		}
		return hb, err
	}

	before := forwardedTo(t, reps[owner].url)
	for i := range 10 {
		if _, err := beat(); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	if got := forwardedTo(t, reps[owner].url) - before; got != 1 {
		t.Fatalf("%v of 10 heartbeats were forwarded to the owner %s, want only the first", got, owner)
	}
	if cc.URL() != reps[owner].url {
		t.Fatalf("the client calls %s first, not the owner %s", cc.URL(), reps[owner].url)
	}
	if len(m.Owned) != 4 {
		t.Fatalf("member owns %v after 10 heartbeats", m.Owned)
	}

	// The owner dies: the next call cannot connect to it and moves on to
	// a stand-by, which answers RETRY until a new owner runs the stream
	// and then forwards, naming the new owner; the client follows.
	if err := reps[owner].proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = reps[owner].proc.Wait(10 * time.Second)
	dead := reps[owner].url
	delete(reps, owner)
	start := time.Now()
	var newOwner string
	if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		hb, err := beat()
		// The client follows the hint to the new owner once that replica
		// answers calls of its own: a replica that answered RETRY while
		// it took the stream over is not followed until then.
		for name, r := range reps {
			if err == nil && hb.Status == protocol.StatusOK && cc.URL() == r.url &&
				ownerOf(t, r.url, "orders", "orders", "") == name {
				newOwner = name
			}
		}
		return newOwner != ""
	}) {
		t.Fatalf("the client did not reach a new owner within 30 s (calls %s first)", cc.URL())
	}
	t.Logf("after the owner's SIGKILL the client heartbeats the new owner %s directly after %v", newOwner, time.Since(start))
	if got := ownerOf(t, reps[newOwner].url, "orders", "orders", ""); got != newOwner {
		t.Fatalf("the client follows %s, the cluster says %s runs the stream", newOwner, got)
	}
	before = forwardedTo(t, reps[newOwner].url)
	for i := range 5 {
		hb, err := beat()
		if err != nil || hb.Status != protocol.StatusOK {
			t.Fatalf("heartbeat %d after the failover: %+v %v", i, hb, err)
		}
	}
	if got := forwardedTo(t, reps[newOwner].url) - before; got != 0 {
		t.Fatalf("%v heartbeats were still forwarded to the new owner", got)
	}
	if len(m.Owned) != 4 || cc.URL() == dead {
		t.Fatalf("member owns %v, client calls %s first", m.Owned, cc.URL())
	}
	for _, r := range reps {
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := r.proc.Wait(20 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, r.proc.Output())
		}
	}
}
