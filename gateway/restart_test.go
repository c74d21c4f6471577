package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/persistence"
)

func TestRestartKeepsEpochsVersionsAndOwnership(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := coordtest.Start(t, dir, coordtest.Options{})
	s.CreateStream("orders", 5)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	var before protocol.GroupResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders", nil, http.StatusOK, &before)
	ownedA, ownedB, epochA := slices.Clone(a.Owned), slices.Clone(b.Owned), a.Epoch
	s.Stop()

	s = coordtest.Start(t, dir, coordtest.Options{})
	var after protocol.GroupResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders", nil, http.StatusOK, &after)
	if after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch ||
		after.MetadataVersion != before.MetadataVersion || after.ShardCount != 5 {
		t.Fatalf("restart changed the group:\n before %+v\n after  %+v", before, after)
	}
	// Members carry on where they were: no fence, no move.
	for _, m := range []*coordtest.Member{a, b} {
		if resp := m.Beat(s); resp.Status != protocol.StatusOK {
			t.Fatalf("%s after restart: %+v", m.ID, resp)
		}
	}
	if !slices.Equal(a.Owned, ownedA) || !slices.Equal(b.Owned, ownedB) || a.Epoch != epochA {
		t.Fatalf("ownership moved across a restart: a %v→%v (epoch %d→%d), b %v→%v", ownedA, a.Owned, epochA, a.Epoch, ownedB, b.Owned)
	}
	var ms protocol.MembersResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &ms)
	for _, m := range ms.Members {
		if m.State != protocol.MemberActive {
			t.Fatalf("restart changed member %s to %s", m.MemberID, m.State)
		}
	}
}

// TestMetadataCorrectionAfterStoreWentBack simulates a coordinator whose
// store lost its latest write: members report a newer metadata version than
// the group has. They are walked back through SYNC_METADATA, then
// REVOKE_PENDING, then OK, and never overlap.
func TestMetadataCorrectionAfterStoreWentBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := coordtest.Start(t, dir, coordtest.Options{})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)
	old, err := s.Store.LoadGroup(ctx, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	// Move the group on: c joins and leaves again.
	c := coordtest.NewMember("c", "orders", "orders")
	c.Beat(s)
	coordtest.Converge(t, s, 8, a, b, c)
	c.Leave(s)
	coordtest.Converge(t, s, 8, a, b)
	if a.Version <= old.Group.MetadataVersion {
		t.Fatalf("the group did not move on: member version %d, old %d", a.Version, old.Group.MetadataVersion)
	}
	s.Stop()

	// Put the old snapshot back, as a store that went back one step would.
	store, err := persistence.OpenPebble(dir, persistence.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := store.LoadGroup(ctx, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.SaveGroup(ctx, old.Group, nil, cur.Revision); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	s = coordtest.Start(t, dir, coordtest.Options{})
	var seen []protocol.Status
	for range 3 {
		r := a.Beat(s)
		t.Logf("a: %s v=%d owned=%v pending=%v", r.Status, r.MetadataVersion, a.Owned, protocol.Indexes(r.Assignment.PendingShards))
		seen = append(seen, r.Status)
		coordtest.CheckNoOverlap(t, a, b)
		if len(seen) == 2 {
			r := b.Beat(s) // b is walked back too
			t.Logf("b: %s v=%d owned=%v pending=%v", r.Status, r.MetadataVersion, b.Owned, protocol.Indexes(r.Assignment.PendingShards))
			coordtest.CheckNoOverlap(t, a, b)
			r = b.Beat(s)
			t.Logf("b: %s v=%d owned=%v pending=%v", r.Status, r.MetadataVersion, b.Owned, protocol.Indexes(r.Assignment.PendingShards))
			coordtest.CheckNoOverlap(t, a, b)
		}
	}
	want := []protocol.Status{protocol.StatusSyncMetadata, protocol.StatusRevokePending, protocol.StatusOK}
	if !slices.Equal(seen, want) {
		t.Fatalf("a saw %v, want %v", seen, want)
	}
	coordtest.Converge(t, s, 8, a, b)
	if a.Version != old.Group.MetadataVersion && a.Version < old.Group.MetadataVersion {
		t.Fatalf("a's version %d went below the group's %d", a.Version, old.Group.MetadataVersion)
	}
}
