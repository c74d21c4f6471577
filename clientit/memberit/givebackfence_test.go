package memberit_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestFencedWhileGivingBackKeepsRunning: a member that gives its shards
// back because its Redis fails, and is fenced while it drains, is not
// leaving for good: Run goes on (its context is live, and the other members
// of the Runtime must not leave with it), and the member joins again once
// Redis answers, without waiting for a handler the fence abandoned.
func TestFencedWhileGivingBackKeepsRunning(t *testing.T) {
	t.Parallel()
	const prefix, shards = "gbfence", 2
	ctx := context.Background()
	srv := redistest.Standalone(t)
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig()})
	coord.CreateStream(prefix, shards)
	rdb := quickClient(t, srv)
	if err := redistest.CreateShards(ctx, rdb, prefix, shards, prefix); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce atomic.Bool
	t.Cleanup(func() {
		if releaseOnce.CompareAndSwap(false, true) {
			close(release)
		}
	})
	handling := make(chan struct{}, 1)
	handler := func(ctx context.Context, msg *member.Message) error {
		select {
		case handling <- struct{}{}:
		default:
		}
		<-release
		return nil
	}
	fence := &rejoinWatch{}
	e := &env{t: t, coord: coord, rdb: rdb, prefix: prefix, shards: shards}
	r := e.start("gb", handler, member.WithHTTPClient(&http.Client{Transport: fence}), member.WithLeaveTimeout(20*time.Second))
	eventually(t, 15*time.Second, "the member owns every shard", func() bool {
		return len(assignments(t, coord, prefix)["gb-m0"]) == shards
	})
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: protocol.StreamKey(prefix, 0), Values: []string{"k", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-handling:
	case <-time.After(10 * time.Second):
		t.Fatal("no record reached the handler")
	}

	// Redis fails: the member gives its shards back, its handler still
	// running, and is fenced meanwhile.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the member gives its shards back", func() bool {
		return r.rt.Status().Members[0].State == member.StateRedisDown
	})
	fence.armed.Store(true)
	eventually(t, 10*time.Second, "a heartbeat answered FENCED", func() bool {
		fenced, _ := fence.times()
		return !fenced.IsZero()
	})
	select {
	case err := <-r.done:
		t.Fatalf("Run returned %v with its context live, after a fence while giving back", err)
	case <-time.After(4 * testInterval):
	}

	// Redis back: the member joins again and owns the shards, its fenced
	// handler still blocked (a fenced run is not waited for; the join
	// waits out the lease of its last answer, not the handler).
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := redistest.CreateShards(ctx, rdb, prefix, shards, prefix); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the member joins again once Redis answers", func() bool {
		return len(assignments(t, coord, prefix)["gb-m0"]) == shards
	})
	if releaseOnce.CompareAndSwap(false, true) {
		close(release)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
