package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// liveOf returns the live view of one group, or false when it is absent.
func liveOf(c *Coordinator, prefix, group string) (LiveGroup, bool) {
	for _, g := range c.LiveGroups() {
		if g.Stream == prefix && g.Group == group {
			return g, true
		}
	}
	return LiveGroup{}, false
}

// sameAsMembers reports how the live view of a group differs from what
// the group actor answers when asked (its members view); "" when it does
// not.
func sameAsMembers(ctx context.Context, c *Coordinator, prefix, group string) string {
	asked, err := c.Members(ctx, prefix, group)
	if err != nil {
		return err.Error()
	}
	live, ok := liveOf(c, prefix, group)
	if !ok {
		return "no live view"
	}
	if len(live.Members) != len(asked.Members) {
		return fmt.Sprintf("live has %d members, the actor %d", len(live.Members), len(asked.Members))
	}
	indices := func(shards []protocol.Shard) []int {
		out := []int{}
		for _, s := range shards {
			out = append(out, s.ShardIndex)
		}
		return out
	}
	orEmpty := func(s []int) []int {
		if s == nil {
			return []int{}
		}
		return s
	}
	for i, m := range asked.Members {
		l := live.Members[i]
		var hb, lease time.Time
		if m.LastHeartbeatAt != nil {
			hb = *m.LastHeartbeatAt
		}
		if m.MemberLeaseExpiresAt != nil {
			lease = *m.MemberLeaseExpiresAt
		}
		switch {
		case l.ID != m.MemberID, l.State != m.State:
			return fmt.Sprintf("member %d: live %s %s, actor %s %s", i, l.ID, l.State, m.MemberID, m.State)
		case !l.LastHeartbeat.Equal(hb), !l.LeaseExpires.Equal(lease):
			return fmt.Sprintf("member %s: live heartbeat %v lease %v, actor %v %v", l.ID, l.LastHeartbeat, l.LeaseExpires, hb, lease)
		case !slices.Equal(orEmpty(l.Current), indices(m.CurrentAssignment)), !slices.Equal(orEmpty(l.Revoking), indices(m.Revoking)):
			return fmt.Sprintf("member %s: live current %v revoking %v, actor %v %v", l.ID, l.Current, l.Revoking, m.CurrentAssignment, m.Revoking)
		case l.MaxConcurrency != m.RuntimeMaxConcurrency:
			return fmt.Sprintf("member %s: live capacity %d, actor %d", l.ID, l.MaxConcurrency, m.RuntimeMaxConcurrency)
		}
	}
	return ""
}

// TestLiveViewFollowsEveryStep: the view group actors publish for scrapes
// stays what the actor itself answers through joins, a rebalance, steady
// heartbeats (which change no durable part), a capacity change, a leave,
// an expiry, a prune and a layout change; a deleted group leaves it.
func TestLiveViewFollowsEveryStep(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Config{Store: pebbleStore(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AutoCreateGroups: true,
		Group: assign.Config{HeartbeatInterval: 200 * time.Millisecond, ReconcileInterval: 100 * time.Millisecond, MemberLease: time.Second,
			StaleMemberRetention: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t", InitialShardCount: new(4)}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if diff := sameAsMembers(ctx, c, "orders", "orders"); diff != "" {
			t.Fatalf("%s: %s", when, diff)
		}
	}
	last := map[string]protocol.HeartbeatResponse{}
	beat := func(id string, capacity int) {
		t.Helper()
		req := join(id)
		if prev, ok := last[id]; ok {
			req = steady(id, prev)
			req.RequestID = fmt.Sprintf("%s-%d", id, time.Now().UnixNano())
		}
		req.RuntimeConsumerCapacity.RuntimeMaxConcurrency = capacity
		resp := c.Heartbeat(ctx, "orders", "orders", id, req)
		if resp.Status == protocol.StatusUnknownMemberID || resp.Status == protocol.StatusFencedMemberEpoch {
			delete(last, id)
			return
		}
		last[id] = resp
	}
	beat("a", 1)
	check("after a's join")
	beat("b", 1)
	check("after b's join")
	for range 6 {
		beat("a", 1)
		beat("b", 1)
	}
	check("after the rebalance")
	beat("a", 7)
	check("after a capacity change")

	// b leaves; a keeps heartbeating while c expires.
	leave := steady("b", last["b"])
	leave.MemberEpoch = protocol.EpochLeave
	leave.RequestID = "b-leave"
	c.Heartbeat(ctx, "orders", "orders", "b", leave)
	check("after b's leave")
	beat("c", 1)
	check("after c's join")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for expired := false; !expired; {
		select {
		case <-deadline:
			t.Fatal("c never showed as EXPIRED in the live view")
		case <-tick.C:
		}
		beat("a", 7)
		live, _ := liveOf(c, "orders", "orders")
		for _, m := range live.Members {
			expired = expired || (m.ID == "c" && m.State == protocol.MemberExpired)
		}
	}
	check("after c's expiry")
	for pruned := false; !pruned; {
		select {
		case <-deadline:
			t.Fatal("c was never pruned from the live view")
		case <-tick.C:
		}
		beat("a", 7)
		live, _ := liveOf(c, "orders", "orders")
		pruned = !slices.ContainsFunc(live.Members, func(m LiveMember) bool { return m.ID == "c" })
	}
	check("after c was pruned")

	if _, err := c.Scale(ctx, "orders", protocol.ScaleRequest{RequestedBy: "t", TargetShardCount: new(6)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.After(10 * time.Second); ; {
		live, _ := liveOf(c, "orders", "orders")
		if len(live.Shards) >= 6 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the live view kept shards %v after a scale to 6", live.Shards)
		case <-tick.C:
		}
	}
	check("after the scale")

	if _, err := c.DeleteGroup(ctx, "orders", "orders", protocol.DeleteGroupRequest{RequestedBy: "t", Force: true}); err != nil {
		t.Fatal(err)
	}
	if g, ok := liveOf(c, "orders", "orders"); ok {
		t.Fatalf("a deleted group is still in the live view: %+v", g)
	}
}

// TestLiveGroupsDoesNotWaitOnABusyActor: a scrape reads the view while
// the group's actor is busy deciding a heartbeat (held here inside the
// step), so it never waits on a mailbox; it sees the state before that
// step.
func TestLiveGroupsDoesNotWaitOnABusyActor(t *testing.T) {
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	first := c.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	entered, release := make(chan struct{}), make(chan struct{})
	c.env.testHooks.afterDecide = func(req *protocol.HeartbeatRequest) {
		if req.RequestID == "busy" {
			close(entered)
			<-release
		}
	}
	answered := make(chan protocol.HeartbeatResponse, 1)
	busy := steady("a", first)
	busy.RequestID = "busy"
	go func() { answered <- c.Heartbeat(ctx, "orders", "orders", "a", busy) }()
	<-entered
	read := make(chan []LiveGroup, 1)
	go func() { read <- c.LiveGroups() }()
	select {
	case groups := <-read:
		if len(groups) != 1 || len(groups[0].Members) != 1 || groups[0].Members[0].ID != "a" {
			t.Errorf("live view while the actor is busy: %+v", groups)
		}
	case <-time.After(5 * time.Second):
		t.Error("LiveGroups waited for a busy group actor")
	}
	close(release)
	if resp := <-answered; resp.Status != protocol.StatusOK {
		t.Fatalf("busy heartbeat: %+v", resp)
	}
}
