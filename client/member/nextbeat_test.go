package member

import (
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestNextBeat(t *testing.T) {
	const (
		wait     = 3 * time.Second
		interval = 3 * time.Second
		short    = 200 * time.Millisecond
	)
	tests := []struct {
		name        string
		f           answerFacts
		next        time.Duration
		wantCatchUp bool
	}{
		{"news after a held answer released early", answerFacts{News: true, Asked: wait, Took: 40 * time.Millisecond, Steady: true, Interval: short}, 0, false},
		{"news after an unheld report", answerFacts{News: true, Interval: short}, 0, false},
		{"news while catching up", answerFacts{News: true, Asked: wait, Took: time.Millisecond, Behind: true, CaughtUp: true, Steady: true, Interval: interval}, 0, false},
		{"held answer that ran its wait, same epoch", answerFacts{Asked: wait, Took: wait + 5*time.Millisecond, Steady: true, Interval: interval}, 0, false},
		{"held answer that ran its wait, new epoch: the steady cadence, no extra", answerFacts{Asked: wait, Took: wait + 5*time.Millisecond, Behind: true, Steady: true, Interval: interval}, 0, false},
		{"held request answered at once only because it was behind: catch up once", answerFacts{Asked: wait, Took: 4 * time.Millisecond, Behind: true, Steady: true, Interval: interval}, 0, true},
		{"behind again right after catching up: wait", answerFacts{Asked: wait, Took: 4 * time.Millisecond, Behind: true, CaughtUp: true, Steady: true, Interval: interval}, wait - 4*time.Millisecond, false},
		{"answered at once, not behind (held budget full, or a coordinator that holds nothing): wait", answerFacts{Asked: wait, Took: 4 * time.Millisecond, Steady: true, Interval: interval}, wait - 4*time.Millisecond, false},
		{"the rest of the wait, at most the answered interval", answerFacts{Asked: wait, Took: time.Second, Steady: true, Interval: short}, short, false},
		{"behind but the next request is not held (revoking): no catch-up", answerFacts{Asked: wait, Took: 4 * time.Millisecond, Behind: true, Interval: short}, short, false},
		{"unheld answer, steady again: parked at once", answerFacts{Took: 3 * time.Millisecond, Behind: true, Steady: true, Interval: interval}, 0, false},
		{"unheld answer with a new epoch alone while revoking: the interval", answerFacts{Took: 3 * time.Millisecond, Behind: true, Interval: short}, short, false},
		{"unheld answer, nothing new, not steady: the interval", answerFacts{Took: 3 * time.Millisecond, Interval: interval}, interval, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, catchUp := nextBeat(tc.f)
			if next != tc.next || catchUp != tc.wantCatchUp {
				t.Fatalf("nextBeat(%+v) = %v, %v; want %v, %v", tc.f, next, catchUp, tc.next, tc.wantCatchUp)
			}
		})
	}
}

func TestAnswerViewLeavesEpochsOut(t *testing.T) {
	base := protocol.HeartbeatResponse{Status: protocol.StatusOK, MemberEpoch: 7, GroupEpoch: 7, AssignmentEpoch: 7, MetadataVersion: 12,
		Assignment: protocol.Assignment{AssignedShards: protocol.Shards([]int{1, 0}), PendingShards: protocol.Shards([]int{2}), MetadataVersion: 12}}
	tests := []struct {
		name string
		edit func(*protocol.HeartbeatResponse)
		news bool
	}{
		{"new member, group and assignment epochs", func(r *protocol.HeartbeatResponse) {
			r.MemberEpoch, r.GroupEpoch, r.AssignmentEpoch = 9, 9, 9
		}, false},
		{"new metadata version", func(r *protocol.HeartbeatResponse) { r.MetadataVersion, r.Assignment.MetadataVersion = 13, 13 }, false},
		{"the same shards in another order", func(r *protocol.HeartbeatResponse) { r.Assignment.AssignedShards = protocol.Shards([]int{0, 1}) }, false},
		{"an owner epoch moved", func(r *protocol.HeartbeatResponse) {
			r.Assignment.AssignedShards = []protocol.Shard{{ShardIndex: 0, OwnerEpoch: 4}, {ShardIndex: 1}}
		}, false},
		{"a shard revoked", func(r *protocol.HeartbeatResponse) { r.Assignment.AssignedShards = protocol.Shards([]int{0}) }, true},
		{"a shard granted", func(r *protocol.HeartbeatResponse) { r.Assignment.AssignedShards = protocol.Shards([]int{0, 1, 3}) }, true},
		{"pending changed", func(r *protocol.HeartbeatResponse) { r.Assignment.PendingShards = nil }, true},
		{"status", func(r *protocol.HeartbeatResponse) { r.Status = protocol.StatusRevokePending }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Assignment.AssignedShards = append([]protocol.Shard(nil), base.Assignment.AssignedShards...)
			tc.edit(&r)
			if news := answerView(r) != answerView(base); news != tc.news {
				t.Fatalf("news %v, want %v: %q vs %q", news, tc.news, answerView(r), answerView(base))
			}
		})
	}
}
