package coordfake_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordfake"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/redistest"
)

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// seen counts handled records by eventId.
type seen struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *seen) add(m *member.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[m.Fields["n"].(string)]++
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.n)
}

// TestFakeDrivesMembersAndProducers: an application's members and producer
// against the fake and a real Redis: the producer routes by the fake's
// routing, two members share the shards and handle every record, a
// scripted assignment moves every shard to one member only after the other
// let go, and a fenced member rejoins and reads again.
func TestFakeDrivesMembersAndProducers(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	const stream, shards = "orders", 4
	if err := redistest.CreateShards(ctx, rdb, stream, shards, stream); err != nil {
		t.Fatal(err)
	}
	fake, err := coordfake.New(coordfake.WithStream(stream, shards))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })

	var handled seen
	var mu sync.Mutex
	var changes []string // a's shard changes: "assigned", "revoked:fenced", …
	hooks := member.Hooks{
		OnAssigned: func(_ context.Context, c member.ShardChange) {
			mu.Lock()
			defer mu.Unlock()
			if c.MemberID == "a-m0" {
				changes = append(changes, "assigned")
			}
		},
		OnRevoked: func(_ context.Context, c member.ShardChange) {
			mu.Lock()
			defer mu.Unlock()
			if c.MemberID == "a-m0" {
				changes = append(changes, "revoked:"+string(c.Reason))
			}
		},
	}
	start := func(base string) context.CancelFunc {
		rt, err := member.New(func(ctx context.Context, m *member.Message) error {
			handled.add(m)
			return m.Ack(ctx)
		}, member.WithCoordinator(fake.URL()), member.WithStream(stream), member.WithRedis(rdb),
			member.WithBaseID(base), member.WithMemberLease(fake.MemberLease()), member.WithBlock(100*time.Millisecond),
			member.WithLeaveTimeout(2*time.Second), member.WithHooks(hooks), member.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- rt.Run(rctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run of %s: %v", base, err)
			}
		})
		return cancel
	}
	start("a")
	start("b")
	eventually(t, 5*time.Second, "a and b hold two shards each", func() bool {
		count := map[string]int{}
		for _, m := range fake.Holders(stream, stream) {
			count[m]++
		}
		return count["a-m0"] == 2 && count["b-m0"] == 2
	})

	p, err := producer.New(producer.WithCoordinator(fake.URL()), producer.WithStream(stream), producer.WithRedis(rdb))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const records = 40
	for i := range records {
		if _, _, err := p.PublishMap(ctx, "key-"+string(rune('a'+i%26))+string(rune('0'+i/26)), map[string]string{"n": string(rune('A' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "every record handled", func() bool { return handled.count() == records })

	fake.Assign(stream, stream, map[string][]int{"a-m0": {0, 1, 2, 3}})
	eventually(t, 5*time.Second, "a holds every shard", func() bool {
		h := fake.Holders(stream, stream)
		return len(h) == shards && !slices.Contains(slices.Collect(maps.Values(h)), "b-m0")
	})

	fake.Fence("a-m0")
	eventually(t, 5*time.Second, "a fenced, rejoined and holding every shard again", func() bool {
		mu.Lock()
		fenced := slices.Index(changes, "revoked:fenced")
		again := fenced >= 0 && slices.Contains(changes[fenced:], "assigned")
		mu.Unlock()
		h := fake.Holders(stream, stream)
		return again && len(h) == shards
	})
	fake.Assign(stream, stream, nil)
	eventually(t, 5*time.Second, "balanced again", func() bool {
		count := map[string]int{}
		for _, m := range fake.Holders(stream, stream) {
			count[m]++
		}
		return count["a-m0"] == 2 && count["b-m0"] == 2
	})
}
