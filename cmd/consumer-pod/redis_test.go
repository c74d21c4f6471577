package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestPodRedisTLSAndNAT runs the pod binary against real Redis set-ups it
// can reach only through the Redis flags: a TLS server with a throwaway CA
// and a password (rediss://, --redis-ca-file, RSCOORD_REDIS_PASSWORD), and
// a 3-master cluster whose nodes announce unreachable ports
// (--redis-nat-map, one seed). Every record is handled in both.
func TestPodRedisTLSAndNAT(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T) (rdb redis.UniversalClient, args, env []string)
	}{
		{"tls", func(t *testing.T) (redis.UniversalClient, []string, []string) {
			srv, files := redistest.StandaloneTLS(t)
			if err := srv.Client().ConfigSet(context.Background(), "requirepass", "pod-pw").Err(); err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "pod-pw"})
			t.Cleanup(func() { rdb.Close() })
			return rdb, []string{"--redis", "rediss://" + srv.TLSAddr, "--redis-ca-file", files.CAFile},
				[]string{"RSCOORD_REDIS_PASSWORD=pod-pw"}
		}},
		{"nat", func(t *testing.T) (redis.UniversalClient, []string, []string) {
			c := redistest.NewCluster(t, redistest.WithAnnouncedPorts())
			var nat []string
			for i := range c.Addrs {
				nat = append(nat, c.Announced[i]+"="+c.Addrs[i])
			}
			return c.Client(), []string{"--redis", c.Addrs[0], "--redis-nat-map", strings.Join(nat, ",")}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const (
				shards = 6
				n      = 24
			)
			prefix := "pod-" + tc.name
			rdb, redisArgs, env := tc.setUp(t)
			coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: assign.Config{
				HeartbeatInterval: 200 * time.Millisecond, ReconcileInterval: 50 * time.Millisecond, MemberLease: 2 * time.Second,
			}})
			coord.CreateStream(prefix, shards)
			ctx := context.Background()
			if err := redistest.CreateShards(ctx, rdb, prefix, shards, prefix); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				key := protocol.StreamKey(prefix, i%shards)
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: map[string]any{"eventId": fmt.Sprintf("ev-%d", i)}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			events := filepath.Join(t.TempDir(), "events.jsonl")
			args := append([]string{"--coordinator", coord.URL, "--stream", prefix, "--member-lease", "2s",
				"--events-log", events, "--base-id", "pod-" + tc.name, "--block", "100ms", "--leave-timeout", "5s"}, redisArgs...)
			pd := startPod(t, env, args...)
			awaitHandled(t, pd, events, n, 30*time.Second)
		})
	}
}
