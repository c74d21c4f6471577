package gateway_test

import (
	"testing"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// A join past the group's member cap is answered RETRY with errorCode
// MEMBER_LIMIT_REACHED in a 200; the members in the group keep their
// shards, and the newcomer joins once one of them leaves. The refusal is
// counted in rscoord_member_limit_refusals_total.
func TestMemberLimitOverHTTP(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Group: assign.Config{MaxMembers: 2}})
	s.CreateStream("orders", 4)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	c := coordtest.NewMember("c", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)

	resp := c.Beat(s)
	if resp.Status != protocol.StatusRetry || resp.ErrorCode != protocol.CodeMemberLimitReached || resp.Message == "" {
		t.Fatalf("join past the cap: %+v", resp)
	}
	checkMetric(t, s, "rscoord_member_limit_refusals_total", nil, func(v float64) bool { return v == 1 })
	coordtest.Converge(t, s, 3, a, b)
	if len(a.Owned)+len(b.Owned) != 4 {
		t.Fatalf("members in the group lost shards: a=%v b=%v", a.Owned, b.Owned)
	}
	var members protocol.MembersResponse
	s.JSON("GET", base+"/monitoring/streams/orders/groups/orders/members", nil, 200, &members)
	if len(members.Members) != 2 {
		t.Fatalf("the refused join was recorded: %+v", members.Members)
	}

	b.Leave(s)
	if resp := c.Beat(s); resp.Status != protocol.StatusOK {
		t.Fatalf("join once a member left: %+v", resp)
	}
	coordtest.Converge(t, s, 10, a, c)
	coordtest.CheckNoOverlap(t, a, c)
}
