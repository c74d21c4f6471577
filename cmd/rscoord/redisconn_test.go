package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// checkProvisioned fails unless every shard of prefix has the consumer
// group prefix in Redis: what the coordinator creates with --redis.
func checkProvisioned(t *testing.T, rdb redis.UniversalClient, prefix string, shards int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range shards {
		key := protocol.StreamKey(prefix, i)
		groups, err := rdb.XInfoGroups(ctx, key).Result()
		if err != nil || len(groups) != 1 || groups[0].Name != prefix {
			t.Errorf("%s: groups %v, %v; want the group %s made by the coordinator", key, groups, err, prefix)
		}
	}
}

// TestServeRedisTLS runs the binary against a real redis-server that
// speaks TLS (throwaway CA) and wants a password: with a rediss:// --redis,
// --redis-ca-file and RSCOORD_REDIS_PASSWORD the coordinator provisions a
// new stream's shards there; the password never shows in the log.
func TestServeRedisTLS(t *testing.T) {
	t.Parallel()
	srv, files := redistest.StandaloneTLS(t)
	plain := srv.Client()
	if err := plain.ConfigSet(context.Background(), "requirepass", "tls-pw").Err(); err != nil {
		t.Fatal(err)
	}
	plain = redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "tls-pw"})
	defer plain.Close()
	p := startProcessEnv(t, t.TempDir(), []string{envAdminPassword + "=" + testAdminPassword, envRedisPassword + "=tls-pw"},
		"--redis", "rediss://"+srv.TLSAddr, "--redis-ca-file", files.CAFile)
	defer func() {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("stop: %v\n%s", err, p.output())
		}
	}()
	s := coordtest.Remote(t, p.url)
	s.Authorization = coordtest.Basic("admin", testAdminPassword)
	s.CreateStream("secure", 3)
	checkProvisioned(t, plain, "secure", 3)
	if strings.Contains(p.output(), "tls-pw") {
		t.Errorf("the Redis password is in the log:\n%s", p.output())
	}
}

// TestServeRedisNATMap runs the binary against a real 3-master Redis
// Cluster whose nodes announce unreachable ports (as behind NAT), with one
// seed and --redis-nat-map: the new stream's shards, spread over all three
// nodes, are provisioned.
func TestServeRedisNATMap(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, redistest.WithAnnouncedPorts())
	var nat []string
	for i := range c.Addrs {
		nat = append(nat, c.Announced[i]+"="+c.Addrs[i])
	}
	p := startProcess(t, t.TempDir(), "--redis", c.Addrs[0], "--redis-nat-map", strings.Join(nat, ","))
	defer func() {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("stop: %v\n%s", err, p.output())
		}
	}()
	const shards = 8
	nodes := map[int]bool{}
	for i := range shards {
		nodes[c.NodeForSlot(protocol.RedisSlot(protocol.StreamKey("natted", i)))] = true
	}
	if len(nodes) != len(c.Nodes) {
		t.Fatalf("the %d shards of natted are on nodes %v: the test needs all %d", shards, nodes, len(c.Nodes))
	}
	s := coordtest.Remote(t, p.url)
	s.Authorization = coordtest.Basic("admin", testAdminPassword)
	s.CreateStream("natted", shards)
	checkProvisioned(t, c.Client(), "natted", shards)
	if !strings.Contains(p.output(), `"cluster":true`) {
		t.Errorf("one seed with a NAT map must be a cluster client; log:\n%s", p.output())
	}
}

// TestServeRedisFlagErrors: bad Redis flags stop serve before it starts,
// with a message naming the flag.
func TestServeRedisFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis", "127.0.0.1:1", "--redis-nat-map", "10.0.0.1:6379"}, "--redis-nat-map"},
		{[]string{"--redis-ca-file", "/nonexistent.pem"}, "need --redis"},
		{[]string{"--redis", "127.0.0.1:1", "--redis-ca-file", "/nonexistent.pem"}, "rediss://"},
		{[]string{"--redis", "http://127.0.0.1:1"}, "--redis"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		// --no-auth: the Redis flags are checked after the store opens, and
		// a bootstrap admin would cost two bcrypt runs (seconds under -race)
		// per case for nothing this test looks at.
		res := runCLI(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--no-auth"}, tc.args...)...)
		cancel()
		if res.code == exitOK || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want a failure naming %q", tc.args, res.code, res.stderr, tc.want)
		}
	}
}
