package actors

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/poll"
)

// removals records what an Observer is told stopped.
type removals struct {
	nopObserver
	mu      sync.Mutex
	groups  []string
	streams []string
}

func (r *removals) GroupRemoved(prefix, group string, _ uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = append(r.groups, prefix+"/"+group)
}

func (r *removals) StreamRemoved(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams = append(r.streams, prefix)
}

func (r *removals) saw(group, stream string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.groups, group) && slices.Contains(r.streams, stream)
}

// TestDroppedStreamIsRemovedFromTheObserver: a stream dropped from a
// coordinator (cluster mode hands it to another replica) tells the
// observer its groups and its migrations are no longer run here, so that
// the metrics of this replica stop reporting them beside those of the
// replica that runs them now.
func TestDroppedStreamIsRemovedFromTheObserver(t *testing.T) {
	ctx := context.Background()
	obs := &removals{}
	c, err := Start(ctx, Config{Store: pebbleStore(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AutoCreateGroups: true, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if resp := c.Heartbeat(ctx, "orders", "orders", "a", join("a")); resp.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", resp)
	}
	if err := c.DropStream(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if !poll.Soon(10*time.Second, func() bool { return obs.saw("orders/orders", "orders") }) {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		t.Fatalf("after the drop the observer was told groups %v and streams %v removed, want orders/orders and orders", obs.groups, obs.streams)
	}
}
