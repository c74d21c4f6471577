package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/cluster/replica"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// replicaProc is one `rscoord serve --store etcd` process on a fixed port.
type replicaProc struct {
	proc *proctest.Process
	url  string
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// testCluster is a coordinator cluster's place on a real 3-member etcd
// cluster, and the credentials every replica on it shares: one users file
// (the MEMBER user and the admin) and the token secret
// (credtest.ServerEnv), so that credentials and tokens are good on every
// replica, as the cluster mode needs.
type testCluster struct {
	*etcdtest.Cluster
	creds credtest.Credentials
	// prefix is the replicas' --etcd-prefix: every key of this test's
	// coordinator cluster is below it.
	prefix string
}

// newTestCluster places a test's coordinator cluster on the package's
// shared etcd cluster (etcdShared), under a key prefix named for the test,
// as coordinator clusters sharing one etcd are: no test sees another's
// keys, and the package starts one etcd cluster instead of one per test.
func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	return &testCluster{Cluster: etcdShared.Cluster(t), creds: credtest.NewCluster(t), prefix: etcdShared.Prefix(t)}
}

// newOwnTestCluster is newTestCluster on an etcd cluster of the test's
// own, for a test that stops etcd members or counts their requests.
func newOwnTestCluster(t *testing.T) *testCluster {
	t.Helper()
	return &testCluster{Cluster: etcdtest.NewCluster(t), creds: credtest.NewCluster(t), prefix: cluster.DefaultRoot}
}

// asAdmin is a handle on the replica at url that administers as the
// bootstrap admin.
func asAdmin(t *testing.T, url string) *coordtest.Server {
	return coordtest.Remote(t, url).As(credtest.AdminAuth())
}

// asMember is a handle on the replica at url that heartbeats as the MEMBER
// user, as members do.
func asMember(t *testing.T, url string) *coordtest.Server {
	return coordtest.Remote(t, url).As(credtest.MemberAuth())
}

// startReplica runs a replica listening on port (advertised as such) and
// returns once its coordinator runs.
func startReplica(t *testing.T, c *testCluster, name string, port int, extra ...string) *replicaProc {
	t.Helper()
	return startReplicaVia(t, c, c.Endpoints(), name, port, extra...)
}

// startReplicaVia is startReplica that reaches etcd at endpoints (a
// proxy's, say) instead of the cluster's own.
func startReplicaVia(t *testing.T, c *testCluster, endpoints []string, name string, port int, extra ...string) *replicaProc {
	t.Helper()
	p := launchReplicaVia(t, c, endpoints, name, port, extra...)
	if _, err := p.proc.WaitForLine(60*time.Second, func(line string) bool {
		return strings.Contains(line, `"rscoord listening"`)
	}); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, p.proc.Output())
	}
	return p
}

// launchReplica runs a replica listening on port (advertised as such)
// without waiting for it.
func launchReplica(t *testing.T, c *testCluster, name string, port int, extra ...string) *replicaProc {
	t.Helper()
	return launchReplicaVia(t, c, c.Endpoints(), name, port, extra...)
}

// launchReplicaVia is launchReplica that reaches etcd at endpoints
// (a proxy's, say) instead of the cluster's own.
func launchReplicaVia(t *testing.T, c *testCluster, endpoints []string, name string, port int, extra ...string) *replicaProc {
	t.Helper()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"serve", "--listen", addr, "--data-dir", t.TempDir(), "--log-format", "json",
		"--store", "etcd", "--etcd-endpoints", strings.Join(endpoints, ","), "--advertise-url", "http://" + addr,
		"--replica-id", name, "--etcd-lease-ttl", "2s", "--etcd-prefix", c.prefix}
	args = append(append(args, c.creds.ServerArgs()...), extra...)
	return &replicaProc{proc: proctest.Start(t, name, bin, args, credtest.ServerEnv()...), url: "http://" + addr}
}

// clusterView is GET /monitoring/cluster of the replica at url; ok false
// on any failure.
func clusterView(url string) (protocol.ClusterResponse, bool) {
	var view protocol.ClusterResponse
	cli := http.Client{Timeout: 2 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url+protocol.BasePath+"/monitoring/cluster", nil)
	if err != nil {
		return view, false
	}
	req.Header.Set("Authorization", credtest.AdminAuth())
	resp, err := cli.Do(req)
	if err != nil {
		return view, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&view) != nil {
		return view, false
	}
	return view, true
}

// ownerOf waits until the replica at url names a live owner of the group
// other than not, and returns its id.
func ownerOf(t *testing.T, url, prefix, group, not string) string {
	t.Helper()
	owner := ""
	poll.UntilEvery(t, 30*time.Second, 50*time.Millisecond, func() bool {
		view, ok := clusterView(url)
		if !ok {
			return false
		}
		live := map[string]bool{}
		for _, r := range view.Replicas {
			live[r.ID] = r.Live
		}
		for _, g := range view.Groups {
			if g.StreamPrefix == prefix && g.ConsumerGroup == group && g.Owner != "" && g.Owner != not && live[g.Owner] {
				owner = g.Owner
				return true
			}
		}
		return false
	}, fmt.Sprintf("a live owner of %s/%s (other than %q) seen by %s", prefix, group, not, url))
	return owner
}

// tryBeat sends one heartbeat of m without failing the test on a refused
// connection or a non-200 answer; it applies an answer it got.
func tryBeat(s *coordtest.Server, m *coordtest.Member) (protocol.HeartbeatResponse, error) {
	hb, _, err := tryBeatVia(s, m)
	return hb, err
}

// tryBeatVia is tryBeat that also returns the stand-by that forwarded the
// heartbeat (X-Rscoord-Forwarded-By), if any.
func tryBeatVia(s *coordtest.Server, m *coordtest.Member) (protocol.HeartbeatResponse, string, error) {
	hb, h, err := tryBeatHeader(s, m)
	return hb, h.Get(replica.ForwardedByHeader), err
}

// tryBeatHeader is tryBeat that also returns the answer's header.
func tryBeatHeader(s *coordtest.Server, m *coordtest.Member) (protocol.HeartbeatResponse, http.Header, error) {
	req := m.Request()
	raw, err := json.Marshal(req)
	if err != nil {
		return protocol.HeartbeatResponse{}, nil, err
	}
	url := s.URL + protocol.BasePath + "/streams/" + m.Prefix + "/groups/" + m.Group + "/members/" + m.ID + "/heartbeat"
	cli := http.Client{Timeout: 2 * time.Second}
	hreq, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return protocol.HeartbeatResponse{}, nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", credtest.MemberAuth()) // members sign in as a MEMBER
	resp, err := cli.Do(hreq)
	if err != nil {
		return protocol.HeartbeatResponse{}, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return protocol.HeartbeatResponse{}, resp.Header, fmt.Errorf("status %d", resp.StatusCode)
	}
	var hb protocol.HeartbeatResponse
	if err := json.NewDecoder(resp.Body).Decode(&hb); err != nil {
		return hb, resp.Header, err
	}
	if hb.ResponseTo != req.RequestID {
		return hb, resp.Header, fmt.Errorf("answer to %q, not to %q", hb.ResponseTo, req.RequestID)
	}
	m.Apply(req, hb)
	return hb, resp.Header, nil
}

// awaitOK beats m against s until an OK answer and returns how long it took.
func awaitOK(t *testing.T, s *coordtest.Server, m *coordtest.Member, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	if !poll.Wait(within, 50*time.Millisecond, func() bool {
		hb, err := tryBeat(s, m)
		if err == nil && hb.Status == protocol.StatusOK {
			return true
		}
		if err == nil {
			err = fmt.Errorf("status %s", hb.Status)
		}
		last = err
		return false
	}) {
		t.Fatalf("no OK heartbeat of %s from %s within %v: %v", m.ID, s.URL, within, last)
	}
	return time.Since(start)
}

// Two replicas on a 3-member etcd cluster: the replica running a group is
// SIGKILLed and the other takes over one etcd lease later, with the
// group's epochs and the members' shards as they were; the dead one comes
// back; a SIGTERM of the group's new owner hands over at once.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	reps := map[string]*replicaProc{}
	ports := map[string]int{"r1": freeLoopbackPort(t), "r2": freeLoopbackPort(t)}
	for _, name := range []string{"r1", "r2"} {
		reps[name] = startReplica(t, c, name, ports[name])
	}
	other := map[string]string{"r1": "r2", "r2": "r1"}
	s1 := asMember(t, reps["r1"].url)
	asAdmin(t, s1.URL).CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s1)
	b.Beat(s1)
	coordtest.Converge(t, s1, 6, a, b)
	var before protocol.GroupResponse
	asAdmin(t, s1.URL).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &before)
	ownedA, ownedB := slices.Clone(a.Owned), slices.Clone(b.Owned)

	// The group's owner dies: the other takes over within its lease (2 s)
	// plus a load.
	owner := ownerOf(t, reps["r1"].url, "orders", "orders", "")
	if err := reps[owner].proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = reps[owner].proc.Wait(10 * time.Second)
	s2 := asMember(t, reps[other[owner]].url)
	took := awaitOK(t, s2, a, 15*time.Second)
	t.Logf("failover after SIGKILL: first OK heartbeat from the new owner after %v", took)
	if took > 8*time.Second {
		t.Fatalf("failover took %v", took)
	}
	awaitOK(t, s2, b, 5*time.Second)
	var after protocol.GroupResponse
	asAdmin(t, s2.URL).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &after)
	if after.GroupEpoch < before.GroupEpoch || after.AssignmentEpoch < before.AssignmentEpoch ||
		after.MetadataVersion < before.MetadataVersion {
		t.Fatalf("epochs went back:\n before %+v\n after  %+v", before, after)
	}
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
		t.Fatalf("ownership moved: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
	}

	// The dead replica comes back (placement may move the group back to
	// it); a SIGTERM of whichever owns the group then hands over without
	// waiting for its lease.
	reps[owner] = startReplica(t, c, owner, ports[owner])
	awaitOK(t, s2, a, 10*time.Second)
	awaitOK(t, s2, b, 5*time.Second)
	owner = ownerOf(t, reps["r1"].url, "orders", "orders", "")
	start := time.Now()
	if err := reps[owner].proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := reps[owner].proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM of %s: %v\n%s", owner, err, reps[owner].proc.Output())
	}
	rest := asMember(t, reps[other[owner]].url)
	awaitOK(t, rest, a, 10*time.Second)
	t.Logf("hand-over after SIGTERM: first OK heartbeat after %v", time.Since(start))
	awaitOK(t, rest, b, 5*time.Second)
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
		t.Fatalf("ownership moved after hand-over: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
	}
	last := reps[other[owner]]
	if err := last.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := last.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, last.proc.Output())
	}
}

// The replica running a group, frozen (SIGSTOP) past its lease, loses the
// group to the other; after SIGCONT it answers nothing with a decision
// and writes nothing until it has joined again; the group's epochs never
// go back.
func TestClusterPausedOwner(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	reps := map[string]*replicaProc{"r1": startReplica(t, c, "r1", freeLoopbackPort(t))}
	reps["r2"] = startReplica(t, c, "r2", freeLoopbackPort(t))
	other := map[string]string{"r1": "r2", "r2": "r1"}
	asAdmin(t, reps["r1"].url).CreateStream("orders", 4)
	owner := ownerOf(t, reps["r1"].url, "orders", "orders", "")
	frozen, live := reps[owner], reps[other[owner]]
	sf, sl := asMember(t, frozen.url), asMember(t, live.url)
	a := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, sf, 6, a)
	var before protocol.GroupResponse
	asAdmin(t, sf.URL).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &before)
	// stale is member a as the frozen owner knows it: its steady
	// heartbeat changes nothing durable, so the frozen owner's own
	// coordinator would answer it OK, granting a's shards, with no write
	// for etcd to refuse. (Another process of a: its own request ids.)
	stale := coordtest.NewMember("a", "orders", "orders")
	knownEpoch, knownVersion, knownOwned := a.Epoch, a.Version, slices.Clone(a.Owned)
	stale.Epoch, stale.Version, stale.Owned = knownEpoch, knownVersion, slices.Clone(knownOwned)

	if err := frozen.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	awaitOK(t, sl, a, 15*time.Second)
	// A new member joins through the new owner: the group epoch moves on.
	b := coordtest.NewMember("b", "orders", "orders")
	coordtest.Converge(t, sl, 8, a, b)
	var moved protocol.GroupResponse
	asAdmin(t, sl.URL).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &moved)

	if err := frozen.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Until it has joined again, whatever the thawed replica answers
	// itself is no decision: an OK heartbeat through it comes from the
	// other, forwarded (it names the other as the owner). The stale
	// steady heartbeat tries the write-free path, a join the written one.
	joined := func() bool { return strings.Count(frozen.proc.Output(), "joined the coordinator cluster") >= 2 }
	tries := 0
	// Probe for up to 3 s; the probes end early once it has joined.
	poll.Wait(3*time.Second, 20*time.Millisecond, func() bool {
		if frozen.proc.Exited() || joined() {
			return true
		}
		for _, m := range []*coordtest.Member{stale, coordtest.NewMember("c", "orders", "orders")} {
			hb, h, err := tryBeatHeader(sf, m)
			if joined() {
				break
			}
			tries++
			if err == nil && hb.Status == protocol.StatusOK && h.Get(protocol.OwnerURLHeader) != live.url {
				t.Fatalf("thawed old owner answered %s's heartbeat with a decision (owner %q): %+v",
					m.ID, h.Get(protocol.OwnerURLHeader), hb)
			}
			// Keep the state the frozen owner knew.
			stale.Epoch, stale.Version, stale.Owned, stale.Revoking = knownEpoch, knownVersion, slices.Clone(knownOwned), []int{}
		}
		return false
	})
	if tries == 0 {
		t.Fatal("no heartbeat reached the thawed old owner before it joined again")
	}
	// It noticed the lost lease, stopped and joined again.
	if _, err := frozen.proc.WaitForLine(20*time.Second, func(line string) bool {
		return strings.Contains(line, "replica lease lost")
	}); err != nil {
		t.Fatalf("thawed old owner did not notice its lost lease: %v\n%s", err, frozen.proc.Output())
	}
	if !poll.Soon(30*time.Second, joined) {
		t.Fatalf("thawed old owner did not join again:\n%s", frozen.proc.Output())
	}
	t.Logf("thawed %s joined again", owner)
	// Joined again, it serves the group or forwards to who does.
	d := coordtest.NewMember("d", "orders", "orders")
	awaitOK(t, sf, d, 10*time.Second)
	var after protocol.GroupResponse
	asAdmin(t, sl.URL).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &after)
	if after.GroupEpoch < moved.GroupEpoch || moved.GroupEpoch < before.GroupEpoch || after.AssignmentEpoch < moved.AssignmentEpoch {
		t.Fatalf("epochs went back: before %+v moved %+v after %+v", before, moved, after)
	}
	coordtest.CheckNoOverlap(t, a, b)
}
