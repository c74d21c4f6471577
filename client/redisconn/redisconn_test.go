package redisconn_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/client/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOpenWithPassword connects to a real redis-server that requires a
// password: through a URL, and through host:port with the password given
// apart; without it Redis refuses.
func TestOpenWithPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := redistest.Standalone(t)
	// Set after start: the harness's readiness check sends no password.
	if err := srv.Client().ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec, password string
		ok             bool
	}{
		{"redis://:s3cret@" + srv.Addr + "/0", "", true},
		{srv.Addr, "s3cret", true},
		{srv.Addr, "", false},
		{"redis://:wrong@" + srv.Addr, "", false},
	} {
		rdb, err := redisconn.Open(tc.spec, redisconn.Config{Password: tc.password})
		if err != nil {
			t.Fatalf("Open(%q): %v", tc.spec, err)
		}
		err = rdb.Ping(ctx).Err()
		rdb.Close()
		if (err == nil) != tc.ok {
			t.Errorf("Open(%q, password %q): ping error %v, want ok=%v", tc.spec, tc.password, err, tc.ok)
		}
	}
}

// TestOpenKinds checks which client each form of --redis gives, and that
// bad values are errors.
func TestOpenKinds(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		cluster bool
		tls     bool
	}{
		{"127.0.0.1:6379", false, false},
		{"127.0.0.1:7001, 127.0.0.1:7002", true, false},
		{"rediss://user:pw@127.0.0.1:6380", false, true},
		{"redis://user:pw@127.0.0.1:7001?addr=127.0.0.1:7002&addr=127.0.0.1:7003", true, false},
		{"rediss://127.0.0.1:7001?addr=127.0.0.1:7002", true, true},
	} {
		rdb, err := redisconn.Open(tc.spec, redisconn.Config{})
		if err != nil {
			t.Fatalf("Open(%q): %v", tc.spec, err)
		}
		switch c := rdb.(type) {
		case *redis.Client:
			if tc.cluster || (c.Options().TLSConfig != nil) != tc.tls {
				t.Errorf("Open(%q): standalone, TLS %v; want cluster=%v tls=%v", tc.spec, c.Options().TLSConfig != nil, tc.cluster, tc.tls)
			}
		case *redis.ClusterClient:
			if !tc.cluster || (c.Options().TLSConfig != nil) != tc.tls {
				t.Errorf("Open(%q): cluster, TLS %v; want cluster=%v tls=%v", tc.spec, c.Options().TLSConfig != nil, tc.cluster, tc.tls)
			}
		default:
			t.Errorf("Open(%q): %T", tc.spec, rdb)
		}
		rdb.Close()
	}
	for _, bad := range []string{"", " , ", "http://127.0.0.1:6379", "redis://127.0.0.1:6379/notadb"} {
		if rdb, err := redisconn.Open(bad, redisconn.Config{}); err == nil {
			rdb.Close()
			t.Errorf("Open(%q): no error", bad)
		}
	}
}
