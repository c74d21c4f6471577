package member

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
)

// panickingShard is a shard actor that panics on panicNow, so that its
// supervisor restarts it as it would after a bug: a new shardActor on the
// same run, as the member actor's producer makes it.
type panickingShard struct{ shardActor }

type panicNow struct{}

func (a *panickingShard) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(panicNow); ok {
		panic("test: shard actor panics")
	}
	a.shardActor.Receive(ctx)
}

// TestRestartedShardActorWaitsForItsRecords: a shard actor restarted after
// a panic starts a new read loop on the same run while records the loop
// before delivered are still queued or being handled (here by a handler
// that ignores its context). They are still in the consumer's pending
// list, so a loop that read its own pending entries at once handed them
// out again. It waits until the run is idle: every record is handled once,
// in order (real Redis, real protoactor supervision).
func TestRestartedShardActorWaitsForItsRecords(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	const stream = "rst"
	if err := redistest.CreateShards(ctx, rdb, stream, 1, "g"); err != nil {
		t.Fatal(err)
	}
	tc := newTestCore(t, 1)
	tc.rdb = rdb
	tc.cfg = &config{stream: stream, group: "g", block: 100 * time.Millisecond, batch: 10,
		claimMinIdle: time.Hour, redisFailureLimit: 3, retryAttempts: 1}
	var ids []string
	for range 2 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream + ":0", Values: []any{"f", "v"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	holding := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	tc.handler = func(hctx context.Context, m *Message) error {
		mu.Lock()
		handled = append(handled, m.ID)
		first := len(handled) == 1
		mu.Unlock()
		if first {
			close(holding)
			<-release // the context is not looked at
		}
		return m.Ack(context.Background())
	}
	tc.sched.start(tc.handle)
	t.Cleanup(func() {
		tc.sched.close()
		tc.sched.wait(5 * time.Second)
	})
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return tc.log }))
	t.Cleanup(system.Shutdown)
	run := newShardRun(tc.memberCore, 0, 1)
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &panickingShard{shardActor{run: run}} }))
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })

	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("no record reached the handler")
	}
	system.Root.Send(pid, panicNow{})
	// The restarted loop would read its pending entries now, which counts
	// a second delivery of them: none may be delivered again over the
	// window.
	never(t, 500*time.Millisecond, func() bool {
		ps, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream + ":0", Group: "g", Start: "-", End: "+", Count: 10}).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.RetryCount > 1 {
				return true
			}
		}
		return false
	}, "a record delivered again while the restarted loop waits")
	releaseOnce.Do(func() { close(release) })
	var pending int64
	if !pollUntil(10*time.Second, func() bool {
		p, err := rdb.XPending(ctx, stream+":0", "g").Result()
		if err != nil {
			t.Fatal(err)
		}
		pending = p.Count
		return pending == 0
	}) {
		t.Fatalf("%d records still pending 10s after the handler was released", pending)
	}
	// Duplicates queued behind would be handled now: none may be over the
	// window.
	never(t, 300*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) > len(ids)
	}, "a record handled twice")
	mu.Lock()
	got := slices.Clone(handled)
	mu.Unlock()
	if !slices.Equal(got, ids) {
		t.Fatalf("handled %v after the shard actor restarted; want each record once, in order: %v", got, ids)
	}
}
