package memberit_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// assignments is the coordinator's view of a group: memberId → shards it
// holds now (currentAssignments of the monitoring endpoint).
func assignments(t *testing.T, coord *coordtest.Server, prefix string) map[string][]protocol.Shard {
	t.Helper()
	var out struct {
		CurrentAssignments map[string][]protocol.Shard `json:"currentAssignments"`
	}
	coord.JSON(http.MethodGet, "/coord/v1/monitoring/streams/"+prefix+"/groups/"+prefix+"/assignments", nil, http.StatusOK, &out)
	return out.CurrentAssignments
}

// quickClient is a client of srv that gives up on a frozen server in
// 300ms instead of go-redis's 3s, so that failed reads come quickly.
func quickClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// redisOutage is one way a member's Redis goes away, and how it comes back.
type redisOutage struct {
	name   string
	break_ func(*redistest.Server) error
	heal   func(context.Context, *redistest.Server) error
}

// redisOutages are the outages the Redis-failure tests run: a killed
// server refuses at once, a frozen one (SIGSTOP) lets reads hang.
func redisOutages() []redisOutage {
	return []redisOutage{
		{"killed", (*redistest.Server).Kill, func(ctx context.Context, s *redistest.Server) error { return s.Restart(ctx) }},
		{"frozen", (*redistest.Server).Pause, func(_ context.Context, s *redistest.Server) error { return s.Resume() }},
	}
}

// TestRedisDownGivesShardsBack: a member whose Redis goes down (killed, or
// frozen with SIGSTOP) gives every shard back after three failed reads, as
// the coordinator sees it, while a member with a working Redis takes them
// all; once its Redis answers again it rejoins and reads.
func TestRedisDownGivesShardsBack(t *testing.T) {
	t.Parallel()
	tests := redisOutages()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const prefix, shards = "fragile", 4
			ctx := context.Background()
			// Two Redis servers, one per member, with the same shards:
			// what breaks is one member's path to Redis.
			sick, well := redistest.Standalone(t), redistest.Standalone(t)
			t.Cleanup(func() { _ = sick.Resume() }) // a frozen server must be resumed before it is stopped
			coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig()})
			coord.CreateStream(prefix, shards)
			for _, srv := range []*redistest.Server{sick, well} {
				if err := redistest.CreateShards(ctx, srv.Client(), prefix, shards, prefix); err != nil {
					t.Fatal(err)
				}
			}
			handler := func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) }
			sickEnv := &env{t: t, coord: coord, rdb: quickClient(t, sick), prefix: prefix, shards: shards}
			wellEnv := &env{t: t, coord: coord, rdb: well.Client(), prefix: prefix, shards: shards}
			a := sickEnv.start("sick", handler)
			b := wellEnv.start("well", handler)
			eventually(t, 15*time.Second, "both members own shards", func() bool {
				cur := assignments(t, coord, prefix)
				return len(cur["sick-m0"]) == shards/2 && len(cur["well-m0"]) == shards/2
			})

			if err := tc.break_(sick); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "the member without Redis owns no shard and the other owns all", func() bool {
				cur := assignments(t, coord, prefix)
				return len(cur["sick-m0"]) == 0 && len(cur["well-m0"]) == shards
			})
			if st := a.rt.Status(); st.Ready || st.Members[0].State != member.StateRedisDown {
				t.Fatalf("the member without Redis: %+v", st)
			}

			if err := tc.heal(ctx, sick); err != nil {
				t.Fatal(err)
			}
			if err := redistest.CreateShards(ctx, sick.Client(), prefix, shards, prefix); err != nil {
				t.Fatal(err) // a restarted server lost its streams
			}
			eventually(t, 20*time.Second, "the member rejoins and reads again", func() bool {
				cur := assignments(t, coord, prefix)
				return len(cur["sick-m0"]) == shards/2 && a.rt.Ready()
			})
			sickEnv.publish(0, 1, "after")
			sickEnv.publish(1, 1, "after")
			sickEnv.publish(2, 1, "after")
			sickEnv.publish(3, 1, "after")
			eventually(t, 10*time.Second, "the records on the healed Redis are acknowledged", func() bool {
				owned := a.rt.Status().Members[0].Owned
				for _, s := range owned {
					if sickEnv.pending(s) != 0 {
						return false
					}
				}
				return len(owned) == shards/2
			})
			for _, r := range []*running{a, b} {
				if err := r.stop(t); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestJoinsOnlyWithRedis: a member whose Redis does not answer never joins
// (the coordinator does not know it) and is not ready; it joins once Redis
// answers.
func TestJoinsOnlyWithRedis(t *testing.T) {
	t.Parallel()
	const prefix = "late"
	ctx := context.Background()
	srv := redistest.Standalone(t)
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig()})
	coord.CreateStream(prefix, 2)
	rdb := quickClient(t, srv)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, coord: coord, rdb: rdb, prefix: prefix, shards: 2}
	r := e.start("late", func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) })
	eventually(t, 5*time.Second, "the member says Redis is down", func() bool {
		return r.rt.Status().Members[0].State == member.StateRedisDown
	})
	// It stays out for four heartbeat intervals, checked all along.
	var cur map[string][]protocol.Shard
	if !poll.Stays(4*testInterval, testInterval/4, func() bool { cur = assignments(t, coord, prefix); return len(cur) == 0 }) {
		t.Fatalf("a member without Redis joined: %v", cur)
	}
	if r.rt.Ready() {
		t.Fatal("a member without Redis reports ready")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := redistest.CreateShards(ctx, rdb, prefix, 2, prefix); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the member joins once Redis answers", func() bool {
		return len(assignments(t, coord, prefix)["late-m0"]) == 2 && r.rt.Ready()
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
