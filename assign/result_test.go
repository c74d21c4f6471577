package assign

import (
	"testing"
	"time"
)

// TestResultNextNeverLate checks the Result.Next contract on a small group:
// whatever Next says, no timer of the group fires before it.
func TestResultNextNeverLate(t *testing.T) {
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
