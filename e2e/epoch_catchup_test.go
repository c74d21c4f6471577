package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/proctest"
	"github.com/rscoord/rscoord/persistence"
)

// TestCoordinatorKilledAfterEpochCatchUps: answers that only move a
// member's epoch up to the group's assignment epoch are not written
// (docs/protocol.md §6.1 step 9). The coordinator binary is SIGKILLed after
// such answers (one of them lost on its way), restarted on the same data
// dir, and the members carry on with the epochs it forgot: no
// INVALID_REQUEST, no fence, no shard moved.
func TestCoordinatorKilledAfterEpochCatchUps(t *testing.T) {
	t.Parallel()
	b := build(t)
	dir := filepath.Join(t.TempDir(), "coord")
	coord, url := startCoordinator(t, b.coordinator, dir)
	remote(t, url).CreateStream("orders", 2)
	s := remote(t, url).As(memberAuth())
	members := map[string]*coordtest.Member{}
	for _, id := range []string{"a", "b", "c"} {
		m := coordtest.NewMember(id, "orders", "orders")
		m.InstanceID = "inst-" + id
		members[id] = m
	}
	a, bm, c := members["a"], members["b"], members["c"]
	a.Beat(s)
	bm.Beat(s)
	coordtest.Converge(t, s, 10, a, bm)
	owned := map[string][]int{"a": slices.Clone(a.Owned), "b": slices.Clone(bm.Owned)}

	// c joins a group of two shards held by two members: it gets nothing,
	// and a and b learn the new epoch and nothing else.
	if resp := c.Beat(s); resp.Status != protocol.StatusOK || len(resp.Assignment.AssignedShards) != 0 {
		t.Fatalf("c's join: %+v", resp)
	}
	c.Beat(s)
	for _, m := range []*coordtest.Member{a, bm} {
		if resp := m.Beat(s); resp.Status != protocol.StatusOK || resp.MemberEpoch != resp.AssignmentEpoch {
			t.Fatalf("%s's catch-up: %+v", m.ID, resp)
		}
	}
	coord, url = killAndRestart(t, b.coordinator, coord, dir, map[string]int64{"a": a.Epoch, "b": bm.Epoch})
	s = remote(t, url).As(memberAuth())
	carryOn(t, s, owned, a, bm, c)

	// c leaves: a catches up again; b's catch-up answer is lost, so b
	// still carries the epoch the first incarnation answered and forgot.
	if resp := c.Leave(s); resp.Status != protocol.StatusOK {
		t.Fatalf("c's leave: %+v", resp)
	}
	if resp := a.Beat(s); resp.Status != protocol.StatusOK || resp.MemberEpoch != resp.AssignmentEpoch {
		t.Fatalf("a's catch-up: %+v", resp)
	}
	if resp := s.Heartbeat("orders", "orders", bm.Request()); resp.Status != protocol.StatusOK {
		t.Fatalf("b's catch-up: %+v", resp)
	}
	coord, url = killAndRestart(t, b.coordinator, coord, dir, map[string]int64{"a": a.Epoch, "b": bm.Epoch})
	s = remote(t, url).As(memberAuth())
	carryOn(t, s, owned, bm, a)

	if err := coord.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := coord.Wait(30 * time.Second); err != nil {
		t.Fatalf("coordinator after SIGTERM: %v", err)
	}
}

// killAndRestart SIGKILLs coord, checks that the store holds an older
// epoch than carried for every member of carried (so the restart really
// forgot what it answered), and starts the coordinator again on dir.
func killAndRestart(t *testing.T, bin string, coord *proctest.Process, dir string, carried map[string]int64) (*proctest.Process, string) {
	t.Helper()
	if err := coord.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = coord.Wait(10 * time.Second) // killed: its exit status is an error
	store, err := persistence.OpenPebble(dir, persistence.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.LoadGroup(context.Background(), "orders", "orders")
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil || rec.Group == nil {
		t.Fatalf("load the group after the kill: %v %v", err, rec.Err)
	}
	for id, e := range carried {
		m := rec.Group.Members[id]
		if m == nil || m.Epoch >= e || e > rec.Group.AssignmentEpoch {
			t.Fatalf("member %s carries epoch %d; the store holds %+v, assignment epoch %d: the catch-up was written",
				id, e, m, rec.Group.AssignmentEpoch)
		}
	}
	return startCoordinator(t, bin, dir)
}

// carryOn checks that every member's next heartbeat, with the epoch it
// carries, is answered OK with the group's assignment epoch and the shards
// it owned, and that the members settle without overlap.
func carryOn(t *testing.T, s *coordtest.Server, owned map[string][]int, ms ...*coordtest.Member) {
	t.Helper()
	for _, m := range ms {
		carried := m.Epoch
		resp := m.Beat(s)
		if resp.Status != protocol.StatusOK || resp.MemberEpoch != resp.AssignmentEpoch || resp.MemberEpoch < carried {
			t.Fatalf("%s with epoch %d after the restart: %+v", m.ID, carried, resp)
		}
		if want, ok := owned[m.ID]; ok && !slices.Equal(m.Owned, want) {
			t.Fatalf("%s owns %v after the restart, owned %v before", m.ID, m.Owned, want)
		}
	}
	coordtest.Converge(t, s, 10, ms...)
	var list protocol.MembersResponse
	remote(t, s.URL).JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &list)
	for _, m := range list.Members {
		if m.MemberID != "c" && m.State != protocol.MemberActive {
			t.Fatalf("member %s is %s after the restart", m.MemberID, m.State)
		}
	}
}
