package gateway_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// memberView returns member id of orders/orders as the monitoring API shows it.
func memberView(t *testing.T, s *coordtest.Server, id string) protocol.Member {
	t.Helper()
	var g protocol.MembersResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &g)
	i := slices.IndexFunc(g.Members, func(m protocol.Member) bool { return m.MemberID == id })
	if i < 0 {
		t.Fatalf("no member %s in %+v", id, g.Members)
	}
	return g.Members[i]
}

// TestLateReferenceReportFreesNothing: a reference client (no instanceId,
// no requestSeq) sends a report as its join's answer arrives, before it
// took its shards; the report is held up in the network. The client reads
// all four shards, then b joins and takes two over. The held-up report
// arrives last, owning nothing: over HTTP it must free none of the shards
// a reads, so b gets nothing until a has given them up.
func TestLateReferenceReportFreesNothing(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	a.Beat(s)
	early := a.Request()
	early.OwnedShards = []protocol.Shard{} // sent before it took them
	a.Beat(s)
	if len(a.Owned) != 4 {
		t.Fatalf("a owns %v, want all 4 shards", a.Owned)
	}
	b := coordtest.NewMember("b", "orders", "orders")
	b.Beat(s)
	s.Heartbeat("orders", "orders", early)
	if r := b.Beat(s); len(r.Assignment.AssignedShards) > 0 {
		t.Fatalf("b granted %v while a reads %v: the late report freed them", r.Assignment.AssignedShards, a.Owned)
	}
	coordtest.CheckNoOverlap(t, a, b)
	coordtest.Converge(t, s, 20, a, b)
	if len(a.Owned) != 2 || len(b.Owned) != 2 {
		t.Fatalf("after convergence a owns %v, b %v", a.Owned, b.Owned)
	}
}

// TestLateLeaveOfAnEarlierProcessChangesNothing: a reference client
// leaves; its first leave is held up in the network and its retry is
// answered. A new process under the same id (a restarted pod) joins and
// reads all four shards. The held-up leave arrives last: it is answered
// as a leave, and the new process keeps its membership and its shards.
func TestLateLeaveOfAnEarlierProcessChangesNothing(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	old := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, s, 10, old)
	// The leave as old.Leave builds it, held up; the retry goes through.
	held := *old
	held.Epoch, held.Revoking, held.Owned = protocol.EpochLeave, slices.Clone(old.Owned), []int{}
	late := held.Request()
	old.Leave(s)

	restarted := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, s, 10, restarted)
	if len(restarted.Owned) != 4 {
		t.Fatalf("the restarted process owns %v, want all 4 shards", restarted.Owned)
	}
	if r := s.Heartbeat("orders", "orders", late); r.Status != protocol.StatusOK || r.MemberEpoch != protocol.EpochLeave {
		t.Fatalf("the late leave: %+v, want OK with epoch -1", r)
	}
	if m := memberView(t, s, "a"); m.State != protocol.MemberActive || len(m.CurrentAssignment) != 4 {
		t.Fatalf("after the late leave a is %s with %v, want ACTIVE with all 4 shards", m.State, m.CurrentAssignment)
	}
	b := coordtest.NewMember("b", "orders", "orders")
	if r := b.Beat(s); len(r.Assignment.AssignedShards) > 0 {
		t.Fatalf("b granted %v while the restarted a reads %v", r.Assignment.AssignedShards, restarted.Owned)
	}
	coordtest.CheckNoOverlap(t, restarted, b)
}
