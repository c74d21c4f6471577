package metrics_test

import (
	"testing"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// TestGroupRemovalsOfOlderActors: the state series of a group follow its
// newest actor; a removal or a state of an actor a newer one replaced
// changes nothing (TestRecreatedGroupKeepsItsSeries in package actors
// meets the race with real actors).
func TestGroupRemovalsOfOlderActors(t *testing.T) {
	type report struct {
		incarnation uint64
		removed     bool
		epoch       int64
	}
	for _, tc := range []struct {
		name    string
		reports []report
		// epoch is the group epoch exported at the end; 0: no series.
		epoch int64
	}{
		{"state", []report{{1, false, 3}}, 3},
		{"removed", []report{{1, false, 3}, {1, true, 0}}, 0},
		{"removal of an older actor after the new one's state", []report{{1, false, 3}, {2, false, 1}, {1, true, 0}}, 1},
		{"removal of a newer actor", []report{{1, false, 3}, {2, true, 0}}, 0},
		{"state of an older actor after the new one's", []report{{2, false, 1}, {1, false, 3}}, 1},
		{"created again after a removal", []report{{1, false, 3}, {1, true, 0}, {2, false, 1}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			for _, r := range tc.reports {
				if r.removed {
					m.GroupRemoved("orders", "late", r.incarnation)
					continue
				}
				m.GroupState("orders", "late", r.incarnation, actors.GroupState{State: protocol.GroupEmpty, GroupEpoch: r.epoch})
			}
			var got int64
			fams, err := m.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fams {
				if f.GetName() == "rscoord_group_epoch" {
					for _, s := range f.GetMetric() {
						got = int64(s.GetGauge().GetValue())
					}
				}
			}
			if got != tc.epoch {
				t.Errorf("rscoord_group_epoch = %d, want %d (0: none)", got, tc.epoch)
			}
		})
	}
}
