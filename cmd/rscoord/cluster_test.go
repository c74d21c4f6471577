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

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/coordtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
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

// startReplica runs a replica listening on port (advertised as such) and
// returns once it logged that it listens (owner) or stands by.
func startReplica(t *testing.T, c *etcdtest.Cluster, name string, port int) (*replicaProc, bool) {
	t.Helper()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"serve", "--listen", addr, "--data-dir", t.TempDir(), "--log-format", "json", "--no-auth",
		"--store", "etcd", "--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--advertise-url", "http://" + addr,
		"--replica-id", name, "--etcd-lease-ttl", "2s"}
	p := &replicaProc{proc: proctest.Start(t, name, bin, args, envAdminPassword+"=", envTokenSecret+"="), url: "http://" + addr}
	line, err := p.proc.WaitForLine(60*time.Second, func(line string) bool {
		return strings.Contains(line, `"rscoord listening"`) || strings.Contains(line, `"standing by"`)
	})
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, p.proc.Output())
	}
	return p, strings.Contains(line, `"rscoord listening"`)
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
	req := m.Request()
	raw, err := json.Marshal(req)
	if err != nil {
		return protocol.HeartbeatResponse{}, "", err
	}
	url := s.URL + protocol.BasePath + "/streams/" + m.Prefix + "/groups/" + m.Group + "/members/" + m.ID + "/heartbeat"
	cli := http.Client{Timeout: 2 * time.Second}
	resp, err := cli.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return protocol.HeartbeatResponse{}, "", err
	}
	defer resp.Body.Close()
	via := resp.Header.Get(forwardedByHeader)
	if resp.StatusCode != http.StatusOK {
		return protocol.HeartbeatResponse{}, via, fmt.Errorf("status %d", resp.StatusCode)
	}
	var hb protocol.HeartbeatResponse
	if err := json.NewDecoder(resp.Body).Decode(&hb); err != nil {
		return hb, via, err
	}
	if hb.ResponseTo != req.RequestID {
		return hb, via, fmt.Errorf("answer to %q, not to %q", hb.ResponseTo, req.RequestID)
	}
	m.Apply(req, hb)
	return hb, via, nil
}

// awaitOK beats m against s until an OK answer and returns how long it took.
func awaitOK(t *testing.T, s *coordtest.Server, m *coordtest.Member, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	for time.Since(start) < within {
		hb, err := tryBeat(s, m)
		if err == nil && hb.Status == protocol.StatusOK {
			return time.Since(start)
		}
		if err == nil {
			err = fmt.Errorf("status %s", hb.Status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no OK heartbeat of %s from %s within %v: %v", m.ID, s.URL, within, last)
	return 0
}

// Two replicas on a 3-member etcd cluster: the owner is SIGKILLed and the
// stand-by takes over one etcd lease later, with the group's epochs and
// the members' shards as they were; the old owner comes back as a
// stand-by; a SIGTERM of the new owner hands over at once.
func TestClusterFailover(t *testing.T) {
	c := etcdtest.NewCluster(t)
	p1, p2 := freeLoopbackPort(t), freeLoopbackPort(t)
	r1, owner := startReplica(t, c, "r1", p1)
	if !owner {
		t.Fatalf("first replica stands by:\n%s", r1.proc.Output())
	}
	r2, owner := startReplica(t, c, "r2", p2)
	if owner {
		t.Fatalf("second replica also owns the coordinator:\n%s", r2.proc.Output())
	}
	s1 := coordtest.Remote(t, r1.url)
	s1.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s1)
	b.Beat(s1)
	coordtest.Converge(t, s1, 6, a, b)
	var before protocol.GroupResponse
	s1.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &before)
	ownedA, ownedB := slices.Clone(a.Owned), slices.Clone(b.Owned)

	// The owner dies: r2 takes over within its lease (2 s) plus a load.
	if err := r1.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r1.proc.Wait(10 * time.Second)
	s2 := coordtest.Remote(t, r2.url)
	took := awaitOK(t, s2, a, 15*time.Second)
	t.Logf("failover after SIGKILL: first OK heartbeat from the new owner after %v", took)
	if took > 8*time.Second {
		t.Fatalf("failover took %v", took)
	}
	awaitOK(t, s2, b, 5*time.Second)
	var after protocol.GroupResponse
	s2.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &after)
	if after.GroupEpoch < before.GroupEpoch || after.AssignmentEpoch < before.AssignmentEpoch ||
		after.MetadataVersion < before.MetadataVersion {
		t.Fatalf("epochs went back:\n before %+v\n after  %+v", before, after)
	}
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
		t.Fatalf("ownership moved: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
	}

	// The old owner comes back and stands by; a SIGTERM of the new owner
	// hands over without waiting for its lease.
	r1, owner = startReplica(t, c, "r1", p1)
	if owner {
		t.Fatalf("restarted r1 took over from a live r2:\n%s", r1.proc.Output())
	}
	start := time.Now()
	if err := r2.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r2.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM of r2: %v\n%s", err, r2.proc.Output())
	}
	awaitOK(t, s1, a, 10*time.Second)
	t.Logf("hand-over after SIGTERM: first OK heartbeat after %v", time.Since(start))
	awaitOK(t, s1, b, 5*time.Second)
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) {
		t.Fatalf("ownership moved after hand-over: a %v→%v b %v→%v", ownedA, a.Owned, ownedB, b.Owned)
	}
	if err := r1.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r1.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM of r1: %v\n%s", err, r1.proc.Output())
	}
}

// A replica frozen (SIGSTOP) past its lease loses ownership to the
// stand-by; after SIGCONT it answers nothing with a decision, writes
// nothing, stops serving and stands by; the group's epochs never go back.
func TestClusterPausedOwner(t *testing.T) {
	c := etcdtest.NewCluster(t)
	r1, owner := startReplica(t, c, "r1", freeLoopbackPort(t))
	if !owner {
		t.Fatal("first replica stands by")
	}
	r2, _ := startReplica(t, c, "r2", freeLoopbackPort(t))
	s1, s2 := coordtest.Remote(t, r1.url), coordtest.Remote(t, r2.url)
	s1.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, s1, 6, a)
	var before protocol.GroupResponse
	s1.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &before)

	if err := r1.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	awaitOK(t, s2, a, 15*time.Second)
	// A new member joins through the new owner: the group epoch moves on.
	b := coordtest.NewMember("b", "orders", "orders")
	coordtest.Converge(t, s2, 8, a, b)
	var moved protocol.GroupResponse
	s2.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &moved)

	if err := r1.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Whatever the thawed r1 answers itself is no decision: an OK
	// heartbeat through it comes from r2, forwarded.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && !r1.proc.Exited() {
		c := coordtest.NewMember("c", "orders", "orders")
		if hb, via, err := tryBeatVia(s1, c); err == nil && hb.Status == protocol.StatusOK && via != "r1" {
			t.Fatalf("thawed old owner answered a heartbeat with a decision: %+v", hb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// It noticed the lost lease, stopped serving and stands by again.
	if _, err := r1.proc.WaitForLine(20*time.Second, func(line string) bool {
		return strings.Contains(line, "replica lease lost")
	}); err != nil {
		t.Fatalf("thawed old owner did not notice its lost lease: %v\n%s", err, r1.proc.Output())
	}
	if _, err := r1.proc.WaitForLine(20*time.Second, func(line string) bool {
		return strings.Contains(line, `"standing by"`)
	}); err != nil {
		t.Fatalf("thawed old owner does not stand by: %v\n%s", err, r1.proc.Output())
	}
	// As a stand-by it forwards to the owner, r2.
	d := coordtest.NewMember("d", "orders", "orders")
	awaitOK(t, s1, d, 10*time.Second)
	var after protocol.GroupResponse
	s2.JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &after)
	if after.GroupEpoch < moved.GroupEpoch || moved.GroupEpoch < before.GroupEpoch || after.AssignmentEpoch < moved.AssignmentEpoch {
		t.Fatalf("epochs went back: before %+v moved %+v after %+v", before, moved, after)
	}
	coordtest.CheckNoOverlap(t, a, b)
}
