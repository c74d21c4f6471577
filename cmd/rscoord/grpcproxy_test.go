package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// startGRPCProxy runs etcd's own gRPC proxy (`etcd grpc-proxy start`, the
// etcd binary the cluster runs) on addr in front of c's members, and
// returns once a Get through it succeeds.
func startGRPCProxy(t *testing.T, c *testCluster, addr string) *proctest.Process {
	t.Helper()
	p := proctest.Start(t, "grpc-proxy", "etcd", []string{"grpc-proxy", "start",
		"--endpoints", strings.Join(c.Endpoints(), ","), "--listen-addr", addr, "--data-dir", t.TempDir()})
	cli, err := c.ClientOf("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = cli.Get(ctx, "rscoord-proxy-probe")
		cancel()
		if err != nil && p.Exited() {
			t.Fatalf("grpc-proxy on %s exited: %v\n%s", addr, err, p.Output())
		}
		return err == nil
	}) {
		t.Fatalf("grpc-proxy on %s does not answer: %v\n%s", addr, err, p.Output())
	}
	return p
}

// A replica reaching etcd only through etcd's gRPC proxy: members join and
// heartbeat through it past several lease TTLs (so its lease renewals
// pass the proxy); with the proxy killed it answers no heartbeat OK once
// the lease it could no longer renew may have lapsed (fail closed); with
// the proxy back on the same address it serves again.
func TestClusterThroughGRPCProxy(t *testing.T) {
	t.Parallel()
	const leaseTTL = 2 * time.Second // launchReplica's --etcd-lease-ttl
	c := newTestCluster(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	proxy := startGRPCProxy(t, c, addr)
	r := startReplicaVia(t, c, []string{"http://" + addr}, "r1", freeLoopbackPort(t),
		"--heartbeat-interval", "1s", "--member-lease", "4s")
	asAdmin(t, r.url).CreateStream("orders", 2)
	s := asMember(t, r.url)
	a := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, s, 8, a)
	// The ticker paces a's heartbeats over two lease TTLs.
	pace := time.NewTicker(200 * time.Millisecond)
	defer pace.Stop()
	for end := time.Now().Add(2 * leaseTTL); time.Now().Before(end); <-pace.C {
		if hb, err := tryBeat(s, a); err != nil || hb.Status != protocol.StatusOK {
			t.Fatalf("heartbeat through the proxy, before any fault: %+v %v\n%s", hb, err, r.proc.Output())
		}
	}
	if len(a.Owned) != 2 {
		t.Fatalf("a reads %v, not both shards", a.Owned)
	}

	if err := proxy.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proxy.Wait(10 * time.Second)
	killed := time.Now()
	var lastOK, firstRefused time.Duration
	fast := time.NewTicker(50 * time.Millisecond)
	defer fast.Stop()
	for ; time.Since(killed) < 2*leaseTTL+time.Second; <-fast.C {
		hb, err := tryBeat(s, a)
		at := time.Since(killed)
		switch {
		case err == nil && hb.Status == protocol.StatusOK:
			lastOK = at
			if at > leaseTTL {
				t.Fatalf("answered OK %v after the proxy died, past the %v lease it could not renew: %+v", at, leaseTTL, hb)
			}
		case firstRefused == 0:
			firstRefused = at
		}
	}
	t.Logf("proxy killed: last OK after %v, first refusal after %v", lastOK, firstRefused)
	if firstRefused == 0 || firstRefused > leaseTTL {
		t.Fatalf("no refused heartbeat within the %v lease of the proxy's death (first after %v)", leaseTTL, firstRefused)
	}

	restarted := time.Now()
	proxy = startGRPCProxy(t, c, addr)
	took := awaitOK(t, s, a, 30*time.Second)
	t.Logf("proxy restarted: first OK heartbeat after %v (%v after the proxy answered)", time.Since(restarted), took)
	if n := strings.Count(r.proc.Output(), "joined the coordinator cluster"); n < 2 {
		t.Fatalf("the replica joined %d times, not again after the proxy came back:\n%s", n, r.proc.Output())
	}
	coordtest.Converge(t, s, 8, a)

	if err := r.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, r.proc.Output())
	}
	if err := proxy.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = proxy.Wait(10 * time.Second)
}
