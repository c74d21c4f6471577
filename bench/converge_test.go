package bench

import (
	"context"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/coordtest"
)

func TestRunConvergeJoinAndLeave(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Group: assign.Config{
		HeartbeatInterval: 300 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
	}})
	rep, err := RunConverge(context.Background(), ConvergeConfig{
		Server: s.URL, Members: 4, Shards: 24, Join: 1, Leave: 1, Rounds: 2, Seed: 1, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Joins) != 2 || len(rep.Leaves) != 2 {
		t.Fatalf("want 2 joins and 2 leaves measured: %+v", rep)
	}
	if rep.Overlaps != 0 || rep.Checks == 0 || rep.Heartbeats == 0 {
		t.Fatalf("overlaps %d in %d checks, %d heartbeats: %v", rep.Overlaps, rep.Checks, rep.Heartbeats, rep.Examples)
	}
	if len(rep.JoinsHeld) != 2 || len(rep.LeavesHeld) != 2 {
		t.Fatalf("held times missing: %+v", rep)
	}
	for i := range 2 {
		// Held comes before the members report it.
		if rep.JoinsHeld[i] <= 0 || rep.JoinsHeld[i] > rep.Joins[i] || rep.LeavesHeld[i] <= 0 || rep.LeavesHeld[i] > rep.Leaves[i] {
			t.Fatalf("held after converged: %+v", rep)
		}
	}
	if rep.Interval != 300*time.Millisecond {
		t.Fatalf("interval = %v, want the coordinator's 300ms", rep.Interval)
	}
	for _, d := range append(rep.Joins, rep.Leaves...) {
		// A change needs at least one round trip, and with a 300 ms
		// interval never more than a few intervals.
		if d <= 0 || d > 2*time.Second {
			t.Fatalf("convergence time %v out of range: %+v", d, rep)
		}
	}
}

func TestRunConvergeWithDrain(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Group: assign.Config{
		HeartbeatInterval: 200 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
	}})
	rep, err := RunConverge(context.Background(), ConvergeConfig{
		Server: s.URL, Members: 3, Shards: 9, Join: 1, Rounds: 1, Drain: 150 * time.Millisecond, Seed: 2,
		Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Joins) != 1 || rep.Overlaps != 0 {
		t.Fatalf("report: %+v", rep)
	}
	// The joiner's shards come from members that drain for 150 ms first.
	if rep.Joins[0] < 150*time.Millisecond {
		t.Fatalf("join converged in %v, faster than the 150ms drain", rep.Joins[0])
	}
}

func TestConvergeCheckFindsOverlap(t *testing.T) {
	w := &convWorld{rep: &ConvergeReport{}}
	w.members = []*convMember{
		{id: "a", owned: []int{1, 2}, draining: map[int]time.Time{}},
		{id: "b", owned: []int{3}, draining: map[int]time.Time{2: time.Now()}},
	}
	w.check()
	if w.rep.Overlaps != 1 || w.rep.Checks != 1 {
		t.Fatalf("overlaps %d in %d checks, want 1 in 1", w.rep.Overlaps, w.rep.Checks)
	}
	w.members[1].draining = map[int]time.Time{}
	w.check()
	if w.rep.Overlaps != 1 {
		t.Fatalf("a clean picture counted an overlap: %v", w.rep.Examples)
	}
}
