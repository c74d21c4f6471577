package memberit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
)

// TestOwnerEpochAndInstance: every record carries the positive ownership
// token of its shard from the coordinator's OK, and two Runtimes draw
// different incarnation ids.
func TestOwnerEpochAndInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "token", 2)
	var mu sync.Mutex
	tokens := map[int]int64{}
	r := e.start("rs-token", func(ctx context.Context, m *member.Message) error {
		mu.Lock()
		tokens[m.Shard] = m.OwnerEpoch
		mu.Unlock()
		return m.Ack(ctx)
	})
	e.publish(0, 2, "a")
	e.publish(1, 2, "a")
	eventually(t, 10*time.Second, "both shards handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tokens) == 2
	})
	mu.Lock()
	for s, tok := range tokens {
		if tok <= 0 {
			t.Errorf("shard %d handled with ownerEpoch %d, want a positive token", s, tok)
		}
	}
	mu.Unlock()
	other, err := member.New(func(context.Context, *member.Message) error { return nil },
		member.WithCoordinator(e.coord.URL), member.WithStream("token"), member.WithRedis(e.rdb))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := r.rt.InstanceID(), other.InstanceID(); a == b || len(a) != 36 {
		t.Fatalf("instance ids %q and %q: want distinct UUID-shaped ids", a, b)
	}
	if ids := other.MemberIDs(); len(ids) != 1 || ids[0] == "" {
		t.Fatalf("default member ids %v", ids)
	}
}
