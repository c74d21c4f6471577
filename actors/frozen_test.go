package actors_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/redisops"
)

func joinReq(id string) *protocol.HeartbeatRequest {
	return &protocol.HeartbeatRequest{
		ProtocolVersion: 1, RequestID: id + "-join", MemberID: id, MemberEpoch: protocol.EpochJoin,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1},
		OwnedShards:             []protocol.Shard{}, RevokingShards: []protocol.RevokingShard{},
	}
}

// startOnRedis starts a coordinator on a Pebble store of its own and the
// Redis rs (2 s per Redis call), closed when the test ends.
func startOnRedis(t *testing.T, rs *redistest.Server, autoCreateGroups bool) *actors.Coordinator {
	t.Helper()
	return startOnRedisWith(t, rs, actors.Config{AutoCreateGroups: autoCreateGroups})
}

// startOnRedisWith is startOnRedis with cfg's other settings: the store,
// logger, Redis and Redis timeout are set here.
func startOnRedisWith(t *testing.T, rs *redistest.Server, cfg actors.Config) *actors.Coordinator {
	t.Helper()
	store, err := persistence.OpenPebble(t.TempDir(), persistence.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg.Store, cfg.Logger = store, slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Redis, cfg.RedisTimeout = redisops.Wrap(rs.Client()), 2*time.Second
	c, err := actors.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// With Redis frozen (SIGSTOP) while a scale provisions its new shards and a
// join registers a new group, the stream actor keeps serving: migration
// reads and heartbeats are answered at once, the join within its second.
// Once Redis is back, the failed scale resumes, and the group registered
// meanwhile is provisioned on every shard, new ones included.
func TestStreamActorServesWhileRedisIsFrozen(t *testing.T) {
	rs := redistest.Standalone(t)
	c := startOnRedis(t, rs, true)
	ctx := context.Background()
	four := 4
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{InitialShardCount: &four, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	a := c.Heartbeat(ctx, "orders", "orders", "a", joinReq("a"))
	if a.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", a)
	}

	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Resume() })

	eight := 8
	scaled := make(chan error, 1)
	go func() {
		_, err := c.Scale(ctx, "orders", protocol.ScaleRequest{TargetShardCount: &eight, RequestedBy: "test", Reason: "frozen"})
		scaled <- err
	}()
	// The scale saves PREPARING before it asks Redis anything.
	poll.Until(t, 10*time.Second, func() bool {
		start := time.Now()
		migs, err := c.Migrations(ctx, "orders", "orders")
		if took := time.Since(start); err != nil || took > 300*time.Millisecond {
			t.Fatalf("migrations while Redis is frozen: %v after %v", err, took)
		}
		if migs.ActiveReshardingID != nil {
			if st := migs.Migrations[0].State; st != protocol.MigrationPreparing {
				t.Fatalf("migration is %s while its provisioning hangs, want PREPARING", st)
			}
			return true
		}
		return false
	}, "the scale to record its migration")

	start := time.Now()
	x := c.Heartbeat(ctx, "orders", "fresh", "x", joinReq("x"))
	if took := time.Since(start); took > 1500*time.Millisecond || (x.Status != protocol.StatusRetry && x.Status != protocol.StatusOK) {
		t.Fatalf("join registering a group with Redis frozen: %s after %v, want an answer within 1.5s", x.Status, took)
	}
	start = time.Now()
	req := joinReq("a")
	req.RequestID, req.MemberEpoch, req.MetadataVersion = "a-1", a.MemberEpoch, a.MetadataVersion
	req.OwnedShards = a.Assignment.AssignedShards
	if resp := c.Heartbeat(ctx, "orders", "orders", "a", req); resp.Status != protocol.StatusOK || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("heartbeat of an existing group with Redis frozen: %s after %v, want OK within 0.5s", resp.Status, time.Since(start))
	}

	// The provisioning gives up: the migration stays PREPARING.
	select {
	case err := <-scaled:
		var perr *protocol.Error
		if !errors.As(err, &perr) || perr.Code != protocol.CodeRedisStreamProvisioningFailed {
			t.Fatalf("scale with Redis frozen: %v, want REDIS_STREAM_PROVISIONING_FAILED", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("scale with Redis frozen never answered")
	}
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}

	// The join registers its group, provisioned on the 4 live shards.
	poll.Until(t, 20*time.Second, func() bool {
		x = c.Heartbeat(ctx, "orders", "fresh", "x", joinReq("x"))
		return x.Status == protocol.StatusOK
	}, "the join to succeed after Redis came back")
	// The same scale again resumes the migration and provisions both groups.
	resp, err := c.Scale(ctx, "orders", protocol.ScaleRequest{TargetShardCount: &eight, RequestedBy: "test", Reason: "resume"})
	if err != nil {
		t.Fatalf("scale resumed: %v", err)
	}
	if st := resp.Migrations[0].State; st != protocol.MigrationActive {
		t.Fatalf("resumed migration is %s, want ACTIVE", st)
	}
	for shard := range 8 {
		key := protocol.StreamKey("orders", shard)
		groups, err := rs.Client().XInfoGroups(ctx, key).Result()
		if err != nil {
			t.Fatalf("XINFO GROUPS %s: %v", key, err)
		}
		var names []string
		for _, g := range groups {
			names = append(names, g.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"fresh", "orders"}) {
			t.Fatalf("groups on %s: %v, want fresh and orders", key, names)
		}
	}
}
