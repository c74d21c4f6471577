package memberit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
)

// TestRevokeHandsBackQueuedRecords: a member with one worker, busy with one
// record, has a shard revoked while dozens of its records are read and
// queued. It reports the shard REVOKED as soon as the running handler
// returns (within 1s of it), not after handling the queue one by one; the
// queued records stay pending and the next owner handles every one of them
// at once, not a claim min idle (30s) later.
func TestRevokeHandsBackQueuedRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "handback", 2)
	for i := range 2 {
		e.publish(i, 40, "hb")
	}
	release := make(chan struct{}, 100)
	var releaseAll sync.Once
	t.Cleanup(func() { releaseAll.Do(func() { close(release) }) })
	running := make(chan int, 100)

	var mu sync.Mutex
	var owned []int
	revokeSeen := make(chan int, 1) // a shard the coordinator took from a
	revokedAt := map[int]time.Time{}
	hooks := member.Hooks{
		OnHeartbeat: func(_ context.Context, ev member.HeartbeatEvent) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Err != nil || ev.Status != "OK" {
				return
			}
			for _, s := range owned {
				if !slices.Contains(ev.Assigned, s) {
					select {
					case revokeSeen <- s:
					default:
					}
				}
			}
			owned = slices.Clone(ev.Assigned)
		},
		OnRevoked: func(_ context.Context, c member.ShardChange) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range c.Shards {
				revokedAt[s] = time.Now()
			}
		},
	}
	e.start("hb-a", func(ctx context.Context, m *member.Message) error {
		running <- m.Shard
		<-release // one token per record, from the test
		return m.Ack(context.Background())
	}, member.WithMaxWorkers(1), member.WithHooks(hooks))
	select {
	case <-running: // one record runs, the rest of both shards' first reads is queued
	case <-time.After(10 * time.Second):
		t.Fatal("a handled nothing within 10s")
	}

	var bMu sync.Mutex
	bHandled := map[int]int{}
	e.start("hb-b", func(ctx context.Context, m *member.Message) error {
		bMu.Lock()
		bHandled[m.Shard]++
		bMu.Unlock()
		return m.Ack(ctx)
	})
	var lost int
	select {
	case lost = <-revokeSeen:
	case <-time.After(10 * time.Second):
		t.Fatal("no shard was revoked from a within 10s of b's start")
	}
	releasedAt := time.Now()
	release <- struct{}{} // the running handler returns; a's next record (if any) blocks again
	eventually(t, 5*time.Second, "a reports the lost shard revoked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !revokedAt[lost].IsZero()
	})
	mu.Lock()
	took := revokedAt[lost].Sub(releasedAt)
	mu.Unlock()
	if took > time.Second {
		t.Fatalf("shard %d revoked %v after its running handler returned, want at most 1s", lost, took)
	}
	// Records 1… of the shard were read by a and never started: b, its next
	// owner, handles them (and the rest) long before a claim min idle.
	eventually(t, 10*time.Second, "b handles every record of the revoked shard", func() bool {
		bMu.Lock()
		defer bMu.Unlock()
		return bHandled[lost] >= 39
	})
	eventually(t, 5*time.Second, "nothing pending on the revoked shard", func() bool { return e.pending(lost) == 0 })
	releaseAll.Do(func() { close(release) })
}
