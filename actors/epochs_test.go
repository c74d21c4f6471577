package actors

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
)

func TestEpochRegressionsAreCaught(t *testing.T) {
	a := &groupActor{env: &env{log: slog.New(slog.NewTextHandler(io.Discard, nil)), obs: nopObserver{}},
		prefix: "orders", name: "orders", g: assign.NewGroup("orders", "orders", 4, time.Now())}
	set := func(group, assignment, version int64) {
		a.g.GroupEpoch, a.g.AssignmentEpoch, a.g.MetadataVersion = group, assignment, version
	}
	steps := []struct {
		kind                       string
		group, assignment, version int64
		regressions                int
	}{
		{StepRestore, 5, 5, 9, 0},
		{StepHeartbeat, 5, 5, 9, 0},  // unchanged
		{StepHeartbeat, 6, 6, 10, 0}, // forward
		{StepTick, 6, 5, 10, 1},      // assignment epoch back
		{StepLayout, 7, 7, 9, 2},     // version back
		{StepRestore, 3, 3, 4, 2},    // an older snapshot restored: a new mark, no regression
		{StepHeartbeat, 3, 3, 4, 2},  //
		{StepHeartbeat, 2, 3, 4, 3},  // group epoch back
	}
	for i, st := range steps {
		set(st.group, st.assignment, st.version)
		a.checkEpochs(st.kind)
		if len(a.regressions) != st.regressions {
			t.Fatalf("step %d (%s): %d regressions %v, want %d", i, st.kind, len(a.regressions), a.regressions, st.regressions)
		}
	}
	if !strings.Contains(a.regressions[0], "assignment 6→5") {
		t.Fatalf("regression message %q", a.regressions[0])
	}
}
