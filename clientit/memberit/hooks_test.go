package memberit_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
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

// TestHooksTellFenced: a member the coordinator fences (a zombie heartbeat
// with its id, incarnation and epoch claims a shard it does not own) hears
// OnRevoked once with every shard it had and the reason fenced, which
// Reason.Lost tells apart from a graceful give-up; it then rejoins and
// hears OnAssigned again.
func TestHooksTellFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "hooksfence", 2)
	handler := func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) }
	var h hookLog
	r := e.start("rs-hf", handler, member.WithHooks(h.hooks()))
	eventually(t, 10*time.Second, "OnAssigned with both shards", func() bool { return h.has("assigned:assigned [0 1]") })

	st := r.rt.Status()
	if len(st.Members) != 1 {
		t.Fatalf("status %+v", st)
	}
	var members protocol.MembersResponse
	e.coord.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/hooksfence/groups/hooksfence/members", nil, http.StatusOK, &members)
	if len(members.Members) != 1 {
		t.Fatalf("members %+v", members.Members)
	}
	zombie := protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion, RequestID: "zombie", MemberID: st.Members[0].MemberID, MemberName: "zombie",
		InstanceID: r.rt.InstanceID(), MemberEpoch: members.Members[0].MemberEpoch, MetadataVersion: members.Members[0].MetadataVersion,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1, AvailableConcurrency: 1},
		OwnedShards:             protocol.Shards([]int{99}),
	}
	if resp := e.coord.Heartbeat("hooksfence", "hooksfence", zombie); resp.Status != protocol.StatusFencedMemberEpoch {
		t.Fatalf("zombie heartbeat answered %s, want FENCED_MEMBER_EPOCH", resp.Status)
	}
	eventually(t, 10*time.Second, "OnRevoked with reason fenced and both shards", func() bool { return h.has("revoked:fenced [0 1]") })
	if !member.ReasonFenced.Lost() || member.ReasonRevoked.Lost() {
		t.Fatal("Reason.Lost must tell fenced from revoked")
	}
	eventually(t, 10*time.Second, "OnAssigned again after the rejoin", func() bool {
		n := 0
		for _, c := range h.all() {
			if c == "assigned:assigned [0 1]" {
				n++
			}
		}
		return n >= 2
	})
}
