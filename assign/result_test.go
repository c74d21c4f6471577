package assign

import (
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// TestResultNextNeverLate checks the Result.Next contract on a small group:
// whatever Next says, no timer of the group fires before it.
func TestResultNextNeverLate(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g := NewGroup("orders", "g", 4, t0)
	res := Heartbeat(g, joinReq("a"), t0, cfg)
	if res.Next.IsZero() {
		t.Fatal("a live member must give a timer (its lease)")
	}
	lease := g.Members["a"].LeaseExpiresAt
	if res.Next.After(lease) {
		t.Fatalf("Next %v is after the lease %v", res.Next, lease)
	}
	// Ticking just before Next changes nothing.
	before := Tick(g, res.Next.Add(-time.Millisecond), cfg)
	if before.Persist || len(before.Events.Expired) != 0 {
		t.Fatalf("tick before Next did something: %+v", before)
	}
}

// TestChangesCostWhatChanged: the result names the durable parts a step
// changed, so that the actor writes only those. A steady heartbeat names
// nothing; a join into a 1,000-member group names the joiner, the members
// whose target gave it shards, and the group — not every member.
func TestChangesCostWhatChanged(t *testing.T) {
	t.Parallel()
	g, reqs := stableGroup(t, 1000, 10_000)
	cfg := testConfig()
	now := t0.Add(time.Second)
	if res := Heartbeat(g, reqs[3], now, cfg); res.Persist || !res.Changes.Empty() {
		t.Fatalf("steady heartbeat: persist %v changes %+v", res.Persist, res.Changes)
	}
	before := partsOf(g)
	res := Heartbeat(g, joinReq("zzz-new"), now, cfg)
	if !res.Persist || !res.Changes.Group {
		t.Fatalf("join: %+v", res.Changes)
	}
	if bad := checkChanges(before, partsOf(g), res.Changes); len(bad) > 0 {
		t.Fatalf("join: %v", bad)
	}
	// 10,000 shards over 1,001 members: the joiner takes 9 shards, each
	// from a different member at most.
	if n := len(res.Changes.Members); n > 1+len(g.Target["zzz-new"]) || !slices.Contains(res.Changes.Members, "zzz-new") {
		t.Errorf("a join names %d members: %v", n, res.Changes.Members)
	}
	if len(res.Changes.Removed) != 0 {
		t.Errorf("removed %v", res.Changes.Removed)
	}
	// The first heartbeat of a giver: its own part (granted set, deadline)
	// and nothing else.
	giver := ""
	for _, id := range res.Changes.Members {
		if id != "zzz-new" {
			giver = id
			break
		}
	}
	var req *protocol.HeartbeatRequest
	for _, r := range reqs {
		if r.MemberID == giver {
			req = r
		}
	}
	req.MemberEpoch = g.Members[giver].Epoch
	before = partsOf(g)
	res = Heartbeat(g, req, now.Add(time.Millisecond), cfg)
	if bad := checkChanges(before, partsOf(g), res.Changes); len(bad) > 0 {
		t.Fatalf("giver: %v", bad)
	}
	if !slices.Equal(res.Changes.Members, []string{giver}) {
		t.Errorf("the giver's heartbeat names %v", res.Changes.Members)
	}
}
