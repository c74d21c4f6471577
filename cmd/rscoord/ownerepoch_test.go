package main

import (
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// epochAnswer is one ownerEpoch a replica answered for a shard: to a
// member in a heartbeat's assignedShards, or (member "") in the
// assignments monitoring endpoint.
type epochAnswer struct {
	member string
	epoch  int64
	// afterFailover: answered after the stream's first owner died.
	afterFailover bool
}

// epochLog records every ownerEpoch answered over HTTP, in answer order,
// per group and shard. It is used from one goroutine: the order of its
// answers is the order the replicas gave them.
type epochLog struct {
	answers       map[string]map[int][]epochAnswer
	afterFailover bool
}

func newEpochLog() *epochLog { return &epochLog{answers: map[string]map[int][]epochAnswer{}} }

func (l *epochLog) record(group, member string, shards []protocol.Shard) {
	if l.answers[group] == nil {
		l.answers[group] = map[int][]epochAnswer{}
	}
	for _, sh := range shards {
		l.answers[group][sh.ShardIndex] = append(l.answers[group][sh.ShardIndex],
			epochAnswer{member: member, epoch: sh.OwnerEpoch, afterFailover: l.afterFailover})
	}
}

// beat sends one heartbeat of m to s and records the owner epochs of its
// answer, whatever its status.
func (l *epochLog) beat(s *coordtest.Server, m *coordtest.Member) (protocol.HeartbeatResponse, error) {
	hb, err := tryBeat(s, m)
	if err == nil {
		l.record(m.Group, m.ID, hb.Assignment.AssignedShards)
	}
	return hb, err
}

// monitor records the owner epochs the assignments endpoint of s shows
// for prefix/group.
func (l *epochLog) monitor(t *testing.T, s *coordtest.Server, prefix, group string) {
	t.Helper()
	var as protocol.AssignmentsResponse
	s.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/"+prefix+"/groups/"+group+"/assignments", nil, http.StatusOK, &as)
	if len(as.InvariantViolations) > 0 {
		t.Fatalf("%s/%s: invariant violations %v", prefix, group, as.InvariantViolations)
	}
	l.record(group, "", as.OwnerEpochs)
}

// settle beats members against s, in turn and recorded, until each is
// answered OK with nothing pending, nothing revoking and the shards it
// reported: RETRY and refused connections while a replica takes a stream
// over are retried.
func (l *epochLog) settle(t *testing.T, s *coordtest.Server, within time.Duration, members ...*coordtest.Member) {
	t.Helper()
	if poll.Wait(within, 100*time.Millisecond, func() bool {
		done := true
		for _, m := range members {
			reported := slices.Clone(m.Owned)
			hb, err := l.beat(s, m)
			coordtest.CheckNoOverlap(t, members...)
			if err != nil || hb.Status != protocol.StatusOK || len(hb.Assignment.PendingShards) > 0 ||
				len(m.Revoking) > 0 || !slices.Equal(reported, m.Owned) {
				done = false
			}
		}
		return done
	}) {
		return
	}
	for _, m := range members {
		t.Logf("%s: epoch %d owns %v revoking %v last %s", m.ID, m.Epoch, m.Owned, m.Revoking, m.Last.Status)
	}
	t.Fatalf("members did not settle on %s within %v", s.URL, within)
}

// check fails the test where the recorded answers break docs/protocol.md
// §9.3 and §9.6: per shard, an ownerEpoch answered is never lower than
// one answered before it, one ownerEpoch is never answered to two
// members, and on the shards regranted (every shard of the groups in
// regranted, and the shards of regrantedShards) every ownerEpoch answered
// after the failover is above every one answered before it.
func (l *epochLog) check(t *testing.T, regranted []string, regrantedShards map[string][]int) {
	t.Helper()
	for group, shards := range l.answers {
		for shard, answers := range shards {
			holder := map[int64]string{}
			var highest, highestBefore int64
			for i, a := range answers {
				where := fmt.Sprintf("%s shard %d answer %d (%q, ownerEpoch %d)", group, shard, i, a.member, a.epoch)
				if a.epoch <= 0 {
					t.Fatalf("%s: ownerEpoch not positive", where)
				}
				if a.epoch < highest {
					t.Fatalf("%s: below %d answered before", where, highest)
				}
				highest = a.epoch
				if a.member != "" {
					if other, ok := holder[a.epoch]; ok && other != a.member {
						t.Fatalf("%s: the same ownerEpoch was answered to %s", where, other)
					}
					holder[a.epoch] = a.member
				}
				if !a.afterFailover {
					highestBefore = a.epoch
				}
			}
			if !slices.Contains(regranted, group) && !slices.Contains(regrantedShards[group], shard) {
				continue
			}
			for i, a := range answers {
				if a.afterFailover && a.epoch <= highestBefore {
					t.Fatalf("%s shard %d answer %d (%q): ownerEpoch %d after the failover, not above %d answered before",
						group, shard, i, a.member, a.epoch, highestBefore)
				}
			}
		}
	}
}

// Owner epochs across a failover: members hold shards with owner epochs
// from the stream's owner replica, which dies (SIGKILL) or freezes past
// its lease (SIGSTOP); the other replica takes the stream over, a holder
// that went silent expires and its shards go to a member that joins; a
// group deleted on the first owner is registered again on the next. A
// frozen owner is then thawed and asked by the expired holder, as it knew
// it, and by the live one. Every ownerEpoch answered over HTTP is
// recorded: per shard none is ever lower than one answered before, none
// is answered to two members, and a regranted shard, and every shard of
// the re-created group, is answered only ownerEpochs above all those
// answered before the failover (docs/protocol.md §9.3, §9.6).
func TestClusterOwnerEpochAcrossFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		freeze bool
	}{
		{name: "owner killed"},
		{name: "owner frozen past its lease", freeze: true},
	} {
		t.Run(tc.name, func(t *testing.T) { ownerEpochAcrossFailover(t, tc.freeze) })
	}
}

func ownerEpochAcrossFailover(t *testing.T, freeze bool) {
	c := newTestCluster(t)
	timing := []string{"--heartbeat-interval", "1s", "--member-lease", "4s"}
	reps := map[string]*replicaProc{
		"r1": startReplica(t, c, "r1", freeLoopbackPort(t), timing...),
		"r2": startReplica(t, c, "r2", freeLoopbackPort(t), timing...),
	}
	other := map[string]string{"r1": "r2", "r2": "r1"}
	asAdmin(t, reps["r1"].url).CreateStream("orders", 4)
	owner := ownerOf(t, reps["r1"].url, "orders", "orders", "")
	first, next := reps[owner], reps[other[owner]]
	sf, admin := asMember(t, first.url), asAdmin(t, first.url)
	rec := newEpochLog()

	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	rec.settle(t, sf, 20*time.Second, a, b)
	if len(b.Owned) == 0 {
		t.Fatalf("b holds nothing: a %v b %v", a.Owned, b.Owned)
	}
	heldByB := slices.Clone(b.Owned)
	knownEpoch, knownVersion := b.Epoch, b.Version
	rec.monitor(t, admin, "orders", "orders")

	// A second group of the stream holds shards, is left and deleted:
	// its tombstone must carry its owner epochs to the next owner.
	x := coordtest.NewMember("x", "orders", "billing")
	rec.settle(t, sf, 20*time.Second, x)
	rec.monitor(t, admin, "orders", "billing")
	if hb := x.Leave(sf); hb.Status != protocol.StatusOK {
		t.Fatalf("x's leave: %+v", hb)
	}
	admin.JSON(http.MethodDelete, protocol.BasePath+"/streams/orders/groups/billing",
		protocol.DeleteGroupRequest{RequestedBy: "test", Reason: "re-created across a failover"}, http.StatusOK, nil)

	if freeze {
		if err := first.proc.Pause(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = first.proc.Signal(syscall.SIGCONT) }()
	} else {
		if err := first.proc.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.proc.Wait(10 * time.Second)
	}
	rec.afterFailover = true
	sn, adminNext := asMember(t, next.url), asAdmin(t, next.url)

	// a carries on with the next owner; b is silent from now on, so its
	// shards go to c once b's lease (one more after the takeover) lapses.
	c2 := coordtest.NewMember("c", "orders", "orders")
	rec.settle(t, sn, 30*time.Second, a, c2)
	if got := ownerOf(t, next.url, "orders", "orders", ""); got != next.proc.Name {
		t.Fatalf("the stream is owned by %s, not by the survivor %s", got, next.proc.Name)
	}
	regranted := []int{}
	for _, s := range heldByB {
		if slices.Contains(c2.Owned, s) {
			regranted = append(regranted, s)
		}
	}
	if len(regranted) == 0 {
		t.Fatalf("none of b's shards %v went to c: a %v c %v", heldByB, a.Owned, c2.Owned)
	}
	rec.monitor(t, adminNext, "orders", "orders")

	// The deleted group is registered again by a join on the next owner.
	y := coordtest.NewMember("y", "orders", "billing")
	rec.settle(t, sn, 20*time.Second, y)
	rec.monitor(t, adminNext, "orders", "billing")

	if freeze {
		// Thawed, the old owner still holds b's grants in memory until it
		// notices its lost lease: whatever it answers b (as b knew
		// itself) and a goes into the log.
		if err := first.proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		answered := 0
		// The ticker paces the stale members' heartbeats over 3 s.
		pace := time.NewTicker(20 * time.Millisecond)
		defer pace.Stop()
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); <-pace.C {
			b.Epoch, b.Version, b.Owned, b.Revoking = knownEpoch, knownVersion, slices.Clone(heldByB), []int{}
			if _, err := rec.beat(sf, b); err == nil {
				answered++
			}
			_, _ = rec.beat(sf, a)
		}
		if answered == 0 {
			t.Fatalf("the thawed old owner answered none of b's heartbeats:\n%s", first.proc.Output())
		}
		rec.settle(t, sf, 20*time.Second, a, c2)
		rec.monitor(t, admin, "orders", "orders")
	}

	rec.check(t, []string{"billing"}, map[string][]int{"orders": regranted})
}
