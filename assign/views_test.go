package assign

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestViews(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	g, cs, now := stable(t, 4, "b", "a")
	g.ActiveMigration = &protocol.Migration{ReshardingID: "r1", FromShardCount: 4, ToShardCount: 6, State: protocol.MigrationActive}
	c := newClient(t, g, "c")
	now = now.Add(time.Second)
	c.beat(now)
	cs[0].beat(now) // b is told to give shard 1 to c
	cs[0].beat(now) // and reports it REVOKING
	cs[1].beat(now)

	sum := g.Summary()
	if sum.StreamPrefix != "orders" || sum.ConsumerGroup != "billing" || sum.State != protocol.GroupReconciling ||
		sum.GroupEpoch != g.GroupEpoch || sum.MetadataVersion != g.MetadataVersion || sum.ShardCount != 4 {
		t.Errorf("summary %+v", sum)
	}
	if sum.TargetAssignmentSummary["c"] != 1 || sum.CurrentAssignmentSummary["c"] != 0 || len(sum.TargetAssignmentSummary) != 3 {
		t.Errorf("summaries %v %v", sum.TargetAssignmentSummary, sum.CurrentAssignmentSummary)
	}
	if sum.ActiveMigration == nil || sum.ActiveMigration == g.ActiveMigration || sum.ActiveMigration.ReshardingID != "r1" {
		t.Errorf("migration %+v (must be a copy)", sum.ActiveMigration)
	}

	ms := g.MemberViews(cfg)
	if len(ms) != 3 || ms[0].MemberID != "a" || ms[1].MemberID != "b" || ms[2].MemberID != "c" {
		t.Fatalf("members not sorted: %+v", ms)
	}
	a := ms[0]
	if a.State != protocol.MemberActive || a.RuntimeMaxConcurrency != 4 || a.ActiveConsumerWorkers != 2 ||
		a.RebalanceTimeoutMs != 60000 || a.LastHeartbeatAt == nil || a.MemberLeaseExpiresAt == nil ||
		a.LastHeartbeatAt.Location() != time.UTC {
		t.Errorf("member view %+v", a)
	}
	if len(a.ShardProgress) == 0 || !slices.IsSortedFunc(a.ShardProgress, func(x, y protocol.ShardProgress) int {
		return x.Shard.ShardIndex - y.Shard.ShardIndex
	}) {
		t.Errorf("progress %+v", a.ShardProgress)
	}

	asg := g.Assignments()
	if len(asg.TargetAssignment) != 3 || len(asg.CurrentAssignments) != 3 || len(asg.InvariantViolations) != 0 {
		t.Errorf("assignments %+v", asg)
	}
	if got := asg.RevokeProgress["b"]; len(got) != 1 || got[0].ShardIndex != 1 || len(asg.RevokeProgress) != 1 {
		t.Errorf("revoke progress %v, want b revoking 1", asg.RevokeProgress)
	}

	rows := g.Consumption()
	if len(rows) == 0 || rows[0].MemberID != "a" || rows[0].StreamKey != "orders:"+itoa(rows[0].Shard.ShardIndex) ||
		rows[0].ConsumerGroup != "billing" {
		t.Errorf("consumption %+v", rows)
	}
	if g.LiveMembers() != 3 {
		t.Errorf("live %d", g.LiveMembers())
	}
	// A LEAVING member shows epoch -1.
	Heartbeat(g, leaveReq(g, "c"), now, cfg)
	for _, m := range g.MemberViews(cfg) {
		if m.MemberID == "c" && (m.MemberEpoch != -1 || m.State != protocol.MemberLeaving) {
			t.Errorf("leaving member view %+v", m)
		}
	}
	if g.LiveMembers() != 2 {
		t.Errorf("live %d after a leave", g.LiveMembers())
	}
}

func itoa(i int) string { return protocol.StreamKey("", i)[1:] }

func TestViewsOfEmptyGroupHaveNoNulls(t *testing.T) {
	t.Parallel()
	g := NewGroup("orders", "billing", 0, t0)
	checkNoNulls(t, g.Summary())
	checkNoNulls(t, protocol.MembersResponse{Members: g.MemberViews(Config{})})
	checkNoNulls(t, g.Assignments())
	checkNoNulls(t, protocol.ConsumptionResponse{Progress: g.Consumption()})
	// A decoded group with nil maps and zero state, too.
	var z Group
	if s := z.Summary(); s.State != protocol.GroupEmpty || s.TargetAssignmentSummary == nil {
		t.Errorf("zero group summary %+v", s)
	}
	checkNoNulls(t, z.Assignments())
}

// TestViewsHaveNoNullsWithMembers: member arrays are [] when empty, even for
// a member that never reported anything.
func TestViewsHaveNoNullsWithMembers(t *testing.T) {
	t.Parallel()
	g := NewGroup("orders", "billing", 0, t0)
	Heartbeat(g, joinReq("a"), t0, testConfig())
	for _, m := range g.MemberViews(Config{}) {
		if m.CurrentAssignment == nil || m.GrantedAssignment == nil || m.Revoking == nil || m.ShardProgress == nil {
			t.Errorf("nil arrays in %+v", m)
		}
	}
	checkNoNulls(t, protocol.MembersResponse{Members: g.MemberViews(Config{})})
	checkNoNulls(t, g.Assignments())
}

// TestShardHolders names who reads or may start to read each shard: a
// live member by its target or any held set, any other member only while
// it still holds the shard.
func TestShardHolders(t *testing.T) {
	t.Parallel()
	g := NewGroup("orders", "billing", 4, t0)
	g.Members = map[string]*Member{
		"a": {ID: "a", State: protocol.MemberActive, Current: []int{0}},
		"b": {ID: "b", State: protocol.MemberActive, Granted: []int{1}},
		"c": {ID: "c", State: protocol.MemberFenced, Revoking: []int{1}},
		"d": {ID: "d", State: protocol.MemberExpired},
	}
	g.Target = map[string][]int{"a": {0, 2}, "b": {1}, "d": {3}}
	got := g.ShardHolders([]int{0, 1, 2, 3})
	want := map[int][]string{0: {"a"}, 1: {"b", "c"}, 2: {"a"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ShardHolders = %v, want %v", got, want)
	}
}
