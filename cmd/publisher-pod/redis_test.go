package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/proctest"
)

// TestPublishRedisTLSAndNAT publishes through the pod binary to real Redis
// set-ups it reaches only through the Redis flags: TLS with a throwaway CA
// and a password, and a cluster whose nodes announce unreachable ports
// (--redis-nat-map, one seed). The published log matches Redis.
func TestPublishRedisTLSAndNAT(t *testing.T) {
	t.Parallel()
	pod := buildPod(t)
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T, e *env) (extra, environ []string)
	}{
		{"tls", func(t *testing.T, e *env) ([]string, []string) {
			srv, files := redistest.StandaloneTLS(t)
			if err := srv.Client().ConfigSet(context.Background(), "requirepass", "pub-pw").Err(); err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "pub-pw"})
			t.Cleanup(func() { rdb.Close() })
			e.rdb, e.redis = rdb, "rediss://"+srv.TLSAddr
			return []string{"--redis-ca-file", files.CAFile}, []string{"RSCOORD_REDIS_PASSWORD=pub-pw"}
		}},
		{"nat", func(t *testing.T, e *env) ([]string, []string) {
			c := redistest.NewCluster(t, redistest.WithAnnouncedPorts())
			var nat []string
			for i := range c.Addrs {
				nat = append(nat, c.Announced[i]+"="+c.Addrs[i])
			}
			e.rdb, e.redis = c.Client(), c.Addrs[0]
			return []string{"--redis-nat-map", strings.Join(nat, ",")}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := &env{coord: coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true}), shards: 6, prefix: "pub-" + tc.name}
			extra, environ := tc.setUp(t, e)
			e.coord.CreateStream(e.prefix, e.shards)
			if err := redistest.CreateShards(context.Background(), e.rdb, e.prefix, e.shards, e.prefix); err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(t.TempDir(), "published.jsonl")
			p := proctest.Start(t, "publisher-pod", pod, e.args(logPath, append(extra, "--count", "120", "--batch", "10")...), environ...)
			if err := p.Wait(time.Minute); err != nil {
				t.Fatalf("publisher-pod: %v\n%s", err, p.Output())
			}
			if n := checkLogMatchesRedis(t, e, readLog(t, logPath)); n != 120 {
				t.Fatalf("%d records published, want 120", n)
			}
		})
	}
}
