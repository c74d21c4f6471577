package redisconn_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestOpenTLS talks to a real redis-server over TLS with a throwaway CA
// and a password: verified with --redis-ca-file's CA it works; without it
// (system roots) the certificate is refused; a CA file with a plain URL,
// or one without a certificate, is an error before any connection.
func TestOpenTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, files := redistest.StandaloneTLS(t)
	if err := srv.Client().ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec string
		cfg  redisconn.Config
		ok   bool
	}{
		{"URL password and CA", "rediss://:s3cret@" + srv.TLSAddr, redisconn.Config{CAFile: files.CAFile}, true},
		{"password from config", "rediss://" + srv.TLSAddr, redisconn.Config{CAFile: files.CAFile, Password: "s3cret"}, true},
		{"wrong password", "rediss://:nope@" + srv.TLSAddr, redisconn.Config{CAFile: files.CAFile}, false},
		{"system roots", "rediss://:s3cret@" + srv.TLSAddr, redisconn.Config{}, false},
		{"plain to the TLS port", "redis://:s3cret@" + srv.TLSAddr, redisconn.Config{ReadTimeout: time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, err := redisconn.Open(tc.spec, tc.cfg)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer rdb.Close()
			err = rdb.Set(ctx, "k", "v", 0).Err()
			if (err == nil) != tc.ok {
				t.Fatalf("SET over %s: %v, want ok=%v", tc.spec, err, tc.ok)
			}
			if tc.name == "system roots" && !strings.Contains(err.Error(), "certificate") {
				t.Errorf("want a certificate error, got %v", err)
			}
		})
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		spec string
		cfg  redisconn.Config
		want string
	}{
		{"redis://" + srv.Addr, redisconn.Config{CAFile: files.CAFile}, "rediss://"},
		{srv.Addr, redisconn.Config{CAFile: files.CAFile}, "rediss://"},
		{"rediss://" + srv.TLSAddr, redisconn.Config{CAFile: empty}, "no PEM certificate"},
		{"rediss://" + srv.TLSAddr, redisconn.Config{CAFile: filepath.Join(t.TempDir(), "missing.pem")}, "no such file"},
	} {
		if rdb, err := redisconn.Open(bad.spec, bad.cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			if rdb != nil {
				rdb.Close()
			}
			t.Errorf("Open(%q, CA %s): %v, want an error naming %q", bad.spec, bad.cfg.CAFile, err, bad.want)
		}
	}
}

// TestParseNATMap checks the --redis-nat-map syntax.
func TestParseNATMap(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // String() of the result; "ERR" for an error
	}{
		{"", ""},
		{" 10.0.0.1:6379=127.0.0.1:7001 , 10.0.0.2:6379=redis-b.example:7002", "10.0.0.1:6379=127.0.0.1:7001,10.0.0.2:6379=redis-b.example:7002"},
		{"[fd00::1]:6379=127.0.0.1:7001", "[fd00::1]:6379=127.0.0.1:7001"},
		{"10.0.0.1:6379", "ERR"},
		{"10.0.0.1=127.0.0.1:7001", "ERR"},
		{"10.0.0.1:6379=127.0.0.1:0", "ERR"},
		{":6379=127.0.0.1:7001", "ERR"},
		{"10.0.0.1:6379=127.0.0.1:7001,10.0.0.1:6379=127.0.0.1:7002", "ERR"},
	} {
		m, err := redisconn.ParseNATMap(tc.in)
		got := "ERR"
		if err == nil {
			got = m.String()
		}
		if got != tc.want {
			t.Errorf("ParseNATMap(%q) = %q (err %v), want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestNATMapCluster runs against a real 3-master Redis Cluster whose nodes
// announce ports nobody listens on, as behind NAT: with the NAT map every
// node is reached (keys on all three slot ranges), including from a single
// seed; without it the client follows the announced addresses and fails.
func TestNATMapCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := redistest.NewCluster(t, redistest.WithAnnouncedPorts())
	var entries []string
	for i := range c.Addrs {
		if c.Announced[i] == c.Addrs[i] {
			t.Fatalf("node %d announces its own address %s", i, c.Addrs[i])
		}
		entries = append(entries, c.Announced[i]+"="+c.Addrs[i])
	}
	nat, err := redisconn.ParseNATMap(strings.Join(entries, ","))
	if err != nil {
		t.Fatal(err)
	}
	// A key in each node's slot range: "{n}" hash tags chosen by slot.
	keys := keysPerNode(t, c)

	for _, spec := range []string{c.Addrs[0], strings.Join(c.Addrs, ","), "redis://" + c.Addrs[1]} {
		rdb, err := redisconn.Open(spec, redisconn.Config{NATMap: nat})
		if err != nil {
			t.Fatalf("Open(%q): %v", spec, err)
		}
		if _, ok := rdb.(*redis.ClusterClient); !ok {
			t.Errorf("Open(%q) with a NAT map: %T, want a cluster client", spec, rdb)
		}
		for _, k := range keys {
			if err := rdb.Set(ctx, k, spec, 0).Err(); err != nil {
				t.Errorf("Open(%q) with the NAT map: SET %s: %v", spec, k, err)
			}
		}
		rdb.Close()
	}
	// Each key landed on its own node (read directly, no cluster routing).
	for i, k := range keys {
		direct := c.Nodes[i].Client()
		if err := direct.Get(ctx, k).Err(); err != nil {
			t.Errorf("GET %s on node %d directly: %v", k, i, err)
		}
	}

	rdb, err := redisconn.Open(strings.Join(c.Addrs, ","), redisconn.Config{
		DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	failed := 0
	for _, k := range keys {
		if rdb.Set(ctx, k, "x", 0).Err() != nil {
			failed++
		}
	}
	if failed != len(keys) {
		t.Errorf("without the NAT map %d of %d writes failed, want all (announced addresses are unreachable)", failed, len(keys))
	}
}

// keysPerNode returns one key served by each node, in node order.
func keysPerNode(t *testing.T, c *redistest.Cluster) []string {
	t.Helper()
	out := make([]string, len(c.Nodes))
	found := 0
	for i := 0; found < len(out) && i < 100000; i++ {
		k := "nat-" + strconv.Itoa(i)
		n := c.NodeForSlot(protocol.RedisSlot(k))
		if n >= 0 && out[n] == "" {
			out[n] = k
			found++
		}
	}
	if found < len(out) {
		t.Fatalf("no key for every node: %v", out)
	}
	return out
}
