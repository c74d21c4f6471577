package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/persistence"
)

// gatedStore holds every group write while the gate is closed, as an etcd
// that stopped answering would: the write is in flight, its outcome comes
// later.
type gatedStore struct {
	persistence.Store
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	entered chan struct{}
}

func (s *gatedStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate, s.entered = make(chan struct{}), make(chan struct{}, 16)
}

func (s *gatedStore) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

func (s *gatedStore) SaveGroup(ctx context.Context, g *assign.Group, ch *persistence.Changes, expected uint64) (uint64, error) {
	s.mu.Lock()
	gate, entered := s.gate, s.entered
	s.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	return s.Store.SaveGroup(ctx, g, ch, expected)
}

// A stream whose actors did not stop within DropStream's wait (a group
// actor inside a store write that hangs) may not be added again until they
// have stopped: in the cluster mode the replica may claim the stream anew,
// and the old actors' late writes would then carry the new claim's fence,
// two actors deciding for one group. AddStream refuses (the caller answers
// "moving, retry") and succeeds once the old actors are gone.
func TestStreamNotAddedWhileItsDroppedActorsRun(t *testing.T) {
	ctx := context.Background()
	store := &gatedStore{Store: pebbleStore(t)}
	c := start(t, store)
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if resp := c.Heartbeat(ctx, "orders", "orders", "a", join("a")); resp.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", resp)
	}
	store.close()
	defer store.open()
	answered := make(chan protocol.HeartbeatResponse, 1)
	go func() { answered <- c.Heartbeat(ctx, "orders", "orders", "b", join("b")) }()
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the join of b never reached the store")
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.DropStream(dctx, "orders")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drop with a group actor inside a write: %v, want the wait to time out", err)
	}
	if err := c.AddStream(ctx, "orders"); err == nil {
		t.Fatalf("the stream was added again while its dropped actors still run (streams %v)", c.Streams())
	}
	store.open()
	<-answered
	if !poll.Soon(20*time.Second, func() bool { err = c.AddStream(ctx, "orders"); return err == nil }) {
		t.Fatalf("the stream cannot be added after its old actors stopped: %v", err)
	}
	if got := c.Streams(); len(got) != 1 {
		t.Fatalf("streams after the add: %v", got)
	}
}
