package memberit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
)

// hookLog records the shard hooks of a Runtime.
type hookLog struct {
	mu         sync.Mutex
	changes    []string // "assigned [0 1 2 3]", "revoked:revoked [2 3]", …
	leaseLost  int
	heartbeats map[string]int // status → count
}

func (h *hookLog) hooks() member.Hooks {
	h.heartbeats = map[string]int{}
	add := func(kind string, c member.ShardChange) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.changes = append(h.changes, kind+":"+string(c.Reason)+" "+fmt.Sprint(c.Shards))
	}
	return member.Hooks{
		OnAssigned: func(_ context.Context, c member.ShardChange) { add("assigned", c) },
		OnRevoked:  func(_ context.Context, c member.ShardChange) { add("revoked", c) },
		OnLeaseLost: func(context.Context, string) {
			h.mu.Lock()
			h.leaseLost++
			h.mu.Unlock()
		},
		OnHeartbeat: func(_ context.Context, e member.HeartbeatEvent) {
			h.mu.Lock()
			h.heartbeats[e.Status]++
			h.mu.Unlock()
		},
	}
}

func (h *hookLog) has(change string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.changes, change)
}

func (h *hookLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.changes)
}

// TestHooksTellSetsAndReasons: OnAssigned and OnRevoked are called once
// per set, each with its reason: assigned at the join, revoked when a
// second member takes half, lease lost when the coordinator goes away
// (after OnLeaseLost), and leaving when Run ends.
func TestHooksTellSetsAndReasons(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "hooks", 4)
	handler := func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) }
	var a hookLog
	ra := e.start("rs-ha", handler, member.WithHooks(a.hooks()))
	eventually(t, 10*time.Second, "OnAssigned with every shard", func() bool { return a.has("assigned:assigned [0 1 2 3]") })
	var b hookLog
	rb := e.start("rs-hb", handler, member.WithHooks(b.hooks()))
	eventually(t, 10*time.Second, "one OnRevoked with the two shards moved", func() bool {
		for _, c := range a.all() {
			if c == "revoked:revoked [0 1]" || c == "revoked:revoked [2 3]" || c == "revoked:revoked [0 2]" ||
				c == "revoked:revoked [1 3]" || c == "revoked:revoked [0 3]" || c == "revoked:revoked [1 2]" {
				return true
			}
		}
		return false
	})
	eventually(t, 10*time.Second, "OnAssigned of the other member with two shards", func() bool {
		for _, c := range b.all() {
			if len(c) == len("assigned:assigned [0 1]") && c[:len("assigned:assigned")] == "assigned:assigned" {
				return true
			}
		}
		return false
	})
	for _, c := range a.all() {
		if len(c) == len("revoked:revoked [0]") {
			t.Fatalf("OnRevoked called per shard: %v", a.all())
		}
	}
	a.mu.Lock()
	ok := a.heartbeats["OK"] > 0
	a.mu.Unlock()
	if !ok {
		t.Fatal("OnHeartbeat never saw an OK")
	}

	if err := rb.stop(t); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "OnRevoked with reason leaving for the member that left", func() bool {
		for _, c := range b.all() {
			if len(c) > len("revoked:leaving") && c[:len("revoked:leaving")] == "revoked:leaving" {
				return true
			}
		}
		return false
	})

	e.coord.Stop()
	eventually(t, 3*testLease, "OnLeaseLost, then OnRevoked with reason lease lost", func() bool {
		a.mu.Lock()
		lost := a.leaseLost
		a.mu.Unlock()
		if lost == 0 {
			return false
		}
		for _, c := range a.all() {
			if len(c) > len("revoked:lease lost") && c[:len("revoked:lease lost")] == "revoked:lease lost" {
				return true
			}
		}
		return false
	})
	if st := ra.rt.Status(); st.Ready || st.Members[0].State != member.StateSuspended {
		t.Fatalf("a member whose lease lapsed: %+v", st)
	}
}
