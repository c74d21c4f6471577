package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/cluster/replica"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// With authentication on, a replica forwards the caller's credentials:
// no credentials are refused (401 with its challenge), Basic credentials
// and a token issued through one replica work everywhere, and, with the
// users file and token secret shared, the token survives a failover.
func TestClusterForwardsCredentials(t *testing.T) {
	t.Parallel()
	start := authReplicas(t)
	r1 := start("r1")
	r2 := start("r2")
	basic := credtest.AdminAuth()

	status, raw := coordtest.Remote(t, r2.url).Do(http.MethodPost, protocol.BasePath+"/streams/orders", protocol.CreateRequest{RequestedBy: "test"})
	if status != http.StatusUnauthorized {
		t.Fatalf("create through the stand-by without credentials: %d %s", status, raw)
	}
	coordtest.Remote(t, r2.url).As(basic).CreateStream("orders", 4)
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	coordtest.Remote(t, r2.url).As(basic).JSON(http.MethodPost, protocol.BasePath+"/auth/login", nil, http.StatusOK, &tok)
	if tok.AccessToken == "" {
		t.Fatal("no token from a login through the stand-by")
	}
	bearer := "Bearer " + tok.AccessToken
	for _, r := range []*replicaProc{r1, r2} {
		var g protocol.GroupResponse
		coordtest.Remote(t, r.url).As(bearer).JSON(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil, http.StatusOK, &g)
	}

	if err := r1.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r1.proc.Wait(10 * time.Second)
	s2 := coordtest.Remote(t, r2.url).As(bearer)
	if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		status, raw = s2.Do(http.MethodGet, protocol.BasePath+"/streams/orders/groups/orders", nil)
		if status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Fatalf("the token after the failover: %d %s", status, raw)
		}
		return status == http.StatusOK
	}) {
		t.Fatalf("the token after the failover: %d %s", status, raw)
	}
	if err := r2.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r2.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM of r2: %v\n%s", err, r2.proc.Output())
	}
}

// authReplicas starts, on a fresh real etcd, replicas with authentication
// on that share one users file (the admin and the MEMBER user) and one
// token secret, as the cluster mode needs (newTestCluster); start waits
// until the replica's coordinator runs.
func authReplicas(t *testing.T) (start func(name string) *replicaProc) {
	t.Helper()
	c := newTestCluster(t)
	return func(name string) *replicaProc {
		t.Helper()
		return startReplica(t, c, name, freeLoopbackPort(t))
	}
}

// Address limits see the client through a forwarding replica: failed
// password checks of one client address, sent through the replica that
// does not run the stream, block that address on the replica that does,
// and not another client's address behind the same forwarding replica;
// behind a trusted proxy (--trusted-proxies), the client it names.
func TestClusterForwardedClientAddressLimits(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	reps := map[string]*replicaProc{}
	for _, name := range []string{"r1", "r2"} {
		reps[name] = startReplica(t, c, name, freeLoopbackPort(t), "--login-address-failure-limit", "3", "--login-failure-limit", "100",
			"--trusted-proxies", "127.0.0.4")
	}
	basic := credtest.AdminAuth()
	coordtest.Remote(t, reps["r1"].url).As(basic).CreateStream("orders", 4)
	owner := ""
	poll.Wait(30*time.Second, 50*time.Millisecond, func() bool {
		status, raw := coordtest.Remote(t, reps["r1"].url).As(basic).Do(http.MethodGet, protocol.BasePath+"/monitoring/cluster", nil)
		var view protocol.ClusterResponse
		if status == http.StatusOK && json.Unmarshal(raw, &view) == nil {
			for _, g := range view.Groups {
				if g.StreamPrefix == "orders" {
					owner = g.Owner
				}
			}
		}
		return owner != ""
	})
	forwarder := map[string]string{"r1": "r2", "r2": "r1"}[owner]
	if forwarder == "" {
		t.Fatal("no owner of orders")
	}
	// from sends a GET of the group through the forwarding replica from a
	// loopback address of its own, with a wrong password and the
	// X-Forwarded-For given ("": none).
	from := func(ip, forwardedFor string) (int, string) {
		cli := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{
			LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}}
		req, _ := http.NewRequest(http.MethodGet, reps[forwarder].url+protocol.BasePath+"/streams/orders/groups/orders", nil)
		req.SetBasicAuth("admin", "wrong")
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		resp, err := cli.Do(req)
		if err != nil {
			t.Fatalf("from %s: %v", ip, err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(replica.ForwardedByHeader)
	}
	// 127.0.0.2 is not a trusted proxy: the address it names in
	// X-Forwarded-For is ignored on the owner too.
	for i := 0; i < 3; i++ {
		if status, via := from("127.0.0.2", fmt.Sprintf("198.51.100.%d", i)); status != http.StatusUnauthorized || via != forwarder {
			t.Fatalf("failure %d from 127.0.0.2: %d via %q", i+1, status, via)
		}
	}
	if status, _ := from("127.0.0.2", "198.51.100.9"); status != http.StatusTooManyRequests {
		t.Fatalf("127.0.0.2 after 3 failures: %d, want 429", status)
	}
	// Another client behind the same forwarding replica is not blocked.
	if status, _ := from("127.0.0.3", ""); status != http.StatusUnauthorized {
		t.Fatalf("127.0.0.3 after another address failed: %d, want 401", status)
	}
	// Behind the trusted proxy 127.0.0.4, the owner counts the client the
	// proxy names, as the forwarding replica would have.
	for i := 0; i < 3; i++ {
		if status, _ := from("127.0.0.4", "203.0.113.7"); status != http.StatusUnauthorized {
			t.Fatalf("failure %d of 203.0.113.7 behind the proxy: %d", i+1, status)
		}
	}
	if status, _ := from("127.0.0.4", "203.0.113.7"); status != http.StatusTooManyRequests {
		t.Fatalf("203.0.113.7 behind the proxy after 3 failures: %d, want 429", status)
	}
	if status, _ := from("127.0.0.4", "203.0.113.8"); status != http.StatusUnauthorized {
		t.Fatalf("203.0.113.8 behind the same proxy: %d, want 401", status)
	}
	for _, r := range reps {
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range reps {
		if err := r.proc.Wait(20 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, r.proc.Output())
		}
	}
}
