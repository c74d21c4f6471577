package actors

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestAnswersNotHeldPassHeldWork: in a group's mailbox a join passes the
// held heartbeats queued before it, and they are still run after it.
func TestAnswersNotHeldPassHeldWork(t *testing.T) {
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	joined := map[string]protocol.HeartbeatResponse{}
	for _, id := range []string{"a", "b", "c", "d"} {
		joined[id] = c.Heartbeat(ctx, "orders", "orders", id, join(id))
		if joined[id].Status != protocol.StatusOK {
			t.Fatalf("join %s: %+v", id, joined[id])
		}
	}
	pid, err := c.lookup(ctx, "orders", "orders", nil)
	if err != nil {
		t.Fatal(err)
	}

	// The group actor decides a's heartbeat and waits there until
	// released, while the test queues held heartbeats and then a join.
	entered, release := make(chan struct{}), make(chan struct{})
	var (
		mu      sync.Mutex
		decided []string
		once    sync.Once
	)
	c.env.testHooks.afterDecide = func(req *protocol.HeartbeatRequest) {
		if req.MemberID == "a" {
			once.Do(func() { close(entered); <-release })
		}
		mu.Lock()
		decided = append(decided, req.MemberID)
		mu.Unlock()
	}
	post := func(req *protocol.HeartbeatRequest) answerTo {
		to := make(answerTo, 1)
		c.env.system.Root.Send(pid, &heartbeatMsg{req: req, to: to})
		return to
	}
	first := post(steady("a", joined["a"]))
	<-entered
	for _, id := range []string{"b", "c", "d"} {
		req := steady(id, joined[id])
		req.WaitMs = 1000
		post(req)
	}
	newcomer := post(join("e"))
	close(release)

	for _, to := range []answerTo{first, newcomer} {
		select {
		case answer := <-to:
			if answer.refusal.Refused() || answer.resp.Status != protocol.StatusOK {
				t.Fatalf("answer %+v", answer)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
	}
	var got []string
	if !poll.Soon(10*time.Second, func() bool {
		mu.Lock()
		got = slices.Clone(decided)
		mu.Unlock()
		return len(got) == 5
	}) {
		t.Fatalf("decided %v, want 5 heartbeats", got)
	}
	if want := []string{"a", "e", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("decided in the order %v, want %v: the join first, then the held heartbeats queued before it", got, want)
	}
}

// TestHeartbeatOfAGoneAskerIsDropped: a heartbeat whose asker gave up
// before the group actor took it is not run, held or not: the request that
// replaced it may have been decided first, and a report older than what
// its member reads would free shards the member still reads.
func TestHeartbeatOfAGoneAskerIsDropped(t *testing.T) {
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	first := c.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	pid, err := c.lookup(ctx, "orders", "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		decided []string
	)
	c.env.testHooks.afterDecide = func(req *protocol.HeartbeatRequest) {
		mu.Lock()
		decided = append(decided, req.RequestID)
		mu.Unlock()
	}
	gone := make(chan struct{})
	close(gone)
	held := steady("a", first)
	held.RequestID, held.WaitMs = "held-gone", 1000
	c.env.system.Root.Send(pid, &heartbeatMsg{req: held, to: make(answerTo, 1), gone: gone})
	unheld := steady("a", first)
	unheld.RequestID = "unheld-gone"
	c.env.system.Root.Send(pid, &heartbeatMsg{req: unheld, to: make(answerTo, 1), gone: gone})
	// A held heartbeat with an asker, queued behind both: once it is
	// answered the actor has taken the two before it (held heartbeats keep
	// their order among themselves).
	last := steady("a", first)
	last.RequestID, last.WaitMs = "last", 50
	if resp := c.Heartbeat(ctx, "orders", "orders", "a", last); resp.Status != protocol.StatusOK {
		t.Fatalf("last: %+v", resp)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"last"}; !slices.Equal(decided, want) {
		t.Fatalf("decided %v, want %v", decided, want)
	}
}
