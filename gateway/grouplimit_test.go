package gateway_test

import (
	"fmt"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// A MEMBER credential that joins 600 groups that do not exist has at most
// the per-stream cap (256) of them registered, in fact its own budget
// (64): the rest of its joins are answered RETRY with
// GROUP_LIMIT_REACHED. Every registered group has an audit entry naming
// the member credential; producer routing past the budget is a 409.
func TestAMemberRegistersABoundedNumberOfGroups(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Auth: &coordtest.Auth{}})
	s.CreateStream("orders", 2)
	member := s.As(coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember)))
	refused := 0
	for i := range 600 {
		m := coordtest.NewMember(fmt.Sprintf("m%d", i), "orders", fmt.Sprintf("g%03d", i))
		resp := m.Beat(member)
		switch {
		case resp.Status == protocol.StatusRetry && resp.ErrorCode == protocol.CodeGroupLimitReached:
			refused++
		case resp.Status != protocol.StatusOK:
			t.Fatalf("join %d: %s %s %s", i, resp.Status, resp.ErrorCode, resp.Message)
		}
	}
	var groups protocol.GroupsResponse
	s.JSON("GET", base+"/monitoring/groups", nil, 200, &groups)
	if n := len(groups.Groups); n > 256 || n != 1+600-refused {
		t.Fatalf("%d groups after 600 joins, %d refused; want at most 256, the default group and the joins not refused", n, refused)
	}
	var page protocol.AuditPage
	s.JSON("GET", base+"/monitoring/audit?streamPrefix=orders&limit=1000", nil, 200, &page)
	audited := map[string]string{}
	for _, e := range page.Entries {
		if e.Operation == protocol.AuditRegisterGroup {
			audited[e.ConsumerGroup] = e.Principal
		}
	}
	for _, g := range groups.Groups {
		if g.ConsumerGroup == "orders" {
			continue
		}
		if p, ok := audited[g.ConsumerGroup]; !ok || p != coordtest.UserMember {
			t.Errorf("group %s: registration audited %v by %q, want by %s", g.ConsumerGroup, ok, p, coordtest.UserMember)
		}
	}
	if len(audited) != len(groups.Groups)-1 {
		t.Errorf("%d registration entries for %d registered groups", len(audited), len(groups.Groups)-1)
	}
	code, body := member.Do("GET", base+"/streams/orders/groups/another/producer-routing", nil)
	if code != 409 {
		t.Errorf("producer routing past the budget: %d %s, want 409 GROUP_LIMIT_REACHED", code, body)
	}
	// An ADMIN still registers on the fly.
	if resp := coordtest.NewMember("a1", "orders", "ops").Beat(s); resp.Status != protocol.StatusOK {
		t.Errorf("admin join past the member's budget: %s %s", resp.Status, resp.ErrorCode)
	}
}
