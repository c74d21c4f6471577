package main

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
)

// TestClusterShutdownKeepsEtcdUntilTheStoreCloses: a replica stopped by
// SIGTERM gives its streams up first, but its actors run until the
// requests in flight end, and whatever they still read or write must meet
// an open etcd client: a refusal (the owner key is gone) has a certain
// outcome and the reload after it works; a closed client leaves the write
// unknown, fails the group closed and loses the audit entry of the
// request. A request whose body trickles keeps the actors running while a
// member expires, which is a write.
func TestClusterShutdownKeepsEtcdUntilTheStoreCloses(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	port := freeLoopbackPort(t)
	r1 := startReplica(t, c, "r1", port, "--heartbeat-interval", "1s", "--member-lease", "4s")
	asAdmin(t, r1.url).CreateStream("orders", 2)
	a := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, asMember(t, r1.url), 5, a)
	lastBeat := time.Now()

	// An admin request about the stream whose body never completes: the
	// replica waits for it before it stops its coordinator.
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST " + protocol.BasePath + "/streams/orders/scale HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
		"Authorization: " + credtest.AdminAuth() + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"shardCount\":"
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the request reached the coordinator's handler
	if err := r1.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Member a expires (a write) while the request is in flight. The
	// duration is the point: the member lease must run out.
	time.Sleep(time.Until(lastBeat.Add(4*time.Second + 1500*time.Millisecond)))
	_ = conn.Close()
	if err := r1.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, r1.proc.Output())
	}
	out := r1.proc.Output()
	if !strings.Contains(out, "rscoord stopped cleanly") {
		t.Fatalf("the replica did not stop cleanly:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "client connection is closing") || strings.Contains(line, "audit entry NOT stored") {
			t.Fatalf("a store request met a closed etcd client at shutdown: %s\n%s", line, out)
		}
	}
}
