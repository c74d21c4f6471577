package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/server"
)

// freePort is a loopback port nobody listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// serve runs srv until the end of the test and waits for Serve to return.
func serve(t *testing.T, srv *server.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Logf("serve: %v", err)
		}
	})
}

// openReplica opens a cluster-mode replica, authentication off, that
// reaches etcd at endpoints.
func openReplica(t *testing.T, endpoints []string, id string) *server.Server {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Auth, cfg.ShutdownTimeout = t.TempDir(), false, 10*time.Second
	// The advertise URL names the port, so the port is chosen first.
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg.Cluster = &server.ClusterConfig{EtcdEndpoints: endpoints, EtcdPrefix: "/gray/", LeaseTTL: 2 * time.Second,
		AdvertiseURL: "http://" + cfg.Listen, ReplicaID: id}
	srv, err := server.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	return srv
}

// beat sends one heartbeat of m to url and applies a 200 answer; took is
// how long the answer took.
func beat(url string, m *coordtest.Member) (hb protocol.HeartbeatResponse, took time.Duration, err error) {
	req := m.Request()
	raw, err := json.Marshal(req)
	if err != nil {
		return hb, 0, err
	}
	cli := http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	resp, err := cli.Post(url+coordclient.HeartbeatPath(m.Prefix, m.Group, m.ID), "application/json", bytes.NewReader(raw))
	took = time.Since(start)
	if err != nil {
		return hb, took, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return hb, took, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&hb); err != nil {
		return hb, took, err
	}
	m.Apply(req, hb)
	return hb, took, nil
}

// every calls f every 50 ms until it returns true or within passes, and
// reports whether it did.
func every(within time.Duration, f func() bool) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	for !f() {
		select {
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
	return true
}

// awaitOK beats m at url until it is answered OK.
func awaitOK(t *testing.T, url string, m *coordtest.Member, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	if !every(within, func() bool {
		hb, _, err := beat(url, m)
		last = fmt.Sprintf("%s %s %s (%v)", hb.Status, hb.ErrorCode, hb.Message, err)
		return err == nil && hb.Status == protocol.StatusOK
	}) {
		t.Fatalf("no OK heartbeat of %s within %v; last %s", m.ID, within, last)
	}
	return time.Since(start)
}

// createStream creates prefix through url, retrying while the replica
// joins.
func createStream(t *testing.T, url, prefix string) {
	t.Helper()
	shards := 2
	body, _ := json.Marshal(protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: "test"})
	var last string
	if !every(20*time.Second, func() bool {
		resp, err := http.Post(url+coordclient.StreamPath(prefix), "application/json", bytes.NewReader(body))
		if err != nil {
			last = err.Error()
			return false
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusCreated
	}) {
		t.Fatalf("create %s: %s", prefix, last)
	}
}

// A Redis that stops answering (SIGSTOP) for ten seconds takes nothing
// from readiness: heartbeats never wait on Redis. The health answer says
// Redis is DOWN meanwhile.
func TestFrozenRedisKeepsTheServerReady(t *testing.T) {
	rds := redistest.Standalone(t)
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Auth, cfg.Redis = "127.0.0.1:0", t.TempDir(), false, []string{rds.Addr}
	srv, err := server.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	get := func(path string, out any) int {
		resp, err := http.Get(srv.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	if code := get("/readyz", nil); code != http.StatusOK {
		t.Fatalf("/readyz before the freeze: %d", code)
	}
	if err := rds.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rds.Resume() })
	frozen := time.Now()
	sawDown := false
	every(10*time.Second, func() bool {
		if code := get("/readyz", nil); code != http.StatusOK {
			t.Fatalf("/readyz %v into the Redis freeze: %d, want 200", time.Since(frozen).Round(time.Millisecond), code)
		}
		var h protocol.Health
		if code := get(coordclient.MonitoringPath("health"), &h); code == http.StatusOK && h.RedisDetail.Status == protocol.HealthDown {
			sawDown = true
		}
		return false // the whole ten seconds
	})
	if !sawDown {
		t.Fatal("the health answer never said Redis is DOWN while it was frozen")
	}
}

// etcd loses its quorum for ten seconds (two of three members stopped):
// the replica loses its lease and answers heartbeats RETRY, at once, all
// along; once etcd is healthy again it takes its old registration over
// and serves OK heartbeats within three seconds.
func TestQuorumBackServiceBack(t *testing.T) {
	etcd := etcdtest.NewCluster(t)
	srv := openReplica(t, etcd.Endpoints(), "r1")
	createStream(t, srv.URL(), "orders")
	m := coordtest.NewMember("m0", "orders", "orders")
	awaitOK(t, srv.URL(), m, 20*time.Second)

	for _, mem := range etcd.Members[1:] {
		if err := mem.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	lost := time.Now()
	sawRetry := false
	every(10*time.Second, func() bool {
		hb, took, err := beat(srv.URL(), m)
		if err != nil || took > 2*time.Second {
			t.Fatalf("heartbeat %v into the quorum loss: %s after %v (%v)", time.Since(lost).Round(time.Millisecond), hb.Status, took, err)
		}
		if hb.Status == protocol.StatusRetry {
			sawRetry = true
			if !hb.ErrorCode.ServedElsewhere() {
				t.Fatalf("RETRY without a replica error code: %+v", hb)
			}
		}
		return false // the whole ten seconds
	})
	if !sawRetry {
		t.Fatal("no RETRY in ten seconds without an etcd quorum")
	}
	ctx := context.Background()
	for _, mem := range etcd.Members[1:] {
		if err := mem.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := etcd.WaitHealthy(hctx); err != nil {
		t.Fatal(err)
	}
	took := awaitOK(t, srv.URL(), m, 20*time.Second)
	t.Logf("OK again %v after etcd was healthy", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Fatalf("OK heartbeats came back %v after etcd was healthy, want at most 3s", took)
	}
}

// A replica whose one etcd endpoint stops answering (the member frozen,
// the rest of etcd healthy) cannot confirm its lease: it answers
// heartbeats RETRY with REPLICA_LEASE_UNCERTAIN at once (a heartbeat
// whose store write etcd does not commit after at most the forwarding
// bound), never after the store's timeout, so that a member moves on to
// another replica.
func TestReplicaCutFromEtcdSaysSoAtOnce(t *testing.T) {
	etcd := etcdtest.NewCluster(t)
	srv := openReplica(t, []string{etcd.Members[0].ClientURL}, "r1")
	createStream(t, srv.URL(), "orders")
	m := coordtest.NewMember("m0", "orders", "orders")
	awaitOK(t, srv.URL(), m, 20*time.Second)

	if err := etcd.Members[0].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Members[0].Resume() })
	cut := time.Now()
	uncertain := 0
	var first time.Time
	if !every(15*time.Second, func() bool {
		hb, took, err := beat(srv.URL(), m)
		// At most the forwarding bound (1 s here): a store write that etcd
		// no longer commits is given up after it.
		if err != nil || took > 1500*time.Millisecond {
			t.Fatalf("heartbeat %v after the cut: %s after %v (%v)", time.Since(cut).Round(time.Millisecond), hb.Status, took, err)
		}
		switch {
		case hb.Status == protocol.StatusRetry && hb.ErrorCode == protocol.CodeReplicaLeaseUncertain:
			if uncertain == 0 {
				first = time.Now()
			}
			uncertain++
		case hb.Status == protocol.StatusOK && uncertain == 0:
			// Its lease still runs: answered as before the cut.
		default:
			t.Fatalf("heartbeat %v after the cut: %+v, want OK until the lease is uncertain, then RETRY %s",
				time.Since(cut).Round(time.Millisecond), hb, protocol.CodeReplicaLeaseUncertain)
		}
		// Through the lost lease and the joins again that hang.
		return uncertain > 0 && time.Since(first) > 5*time.Second
	}) {
		t.Fatalf("%d RETRY %s answers in 15s after the cut", uncertain, protocol.CodeReplicaLeaseUncertain)
	}
}
