package bench

import (
	"context"
	"testing"

	"github.com/rscoord/rscoord/coordtest"
)

func TestRunScaleMeasuresMembersAndRestarts(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	dir := s.Dir
	rep, err := RunScale(context.Background(), ScaleConfig{
		Server: s.URL, Groups: 20, Members: 200, Shards: 10, Conns: 8, Restarts: 2,
		Stop: func(context.Context) error { s.Stop(); return nil },
		Start: func(context.Context) (string, error) {
			s = coordtest.Start(t, dir, coordtest.Options{})
			return s.URL, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Members != 200 || len(rep.Restarts) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	// 200 members with a shard each hold far more than nothing and far
	// less than a megabyte each.
	if rep.PerMember <= 0 || rep.PerMember > 1<<20 || rep.HeapMembers <= rep.HeapGroups {
		t.Fatalf("heap %d → %d: %.0f bytes per member", rep.HeapGroups, rep.HeapMembers, rep.PerMember)
	}
	for _, r := range rep.Restarts {
		if r.Stop <= 0 || r.Start <= 0 || r.Served < r.Start {
			t.Fatalf("restart timings out of order: %+v", r)
		}
	}
}

func TestRunScaleRefusesUnevenMembers(t *testing.T) {
	if _, err := RunScale(context.Background(), ScaleConfig{Groups: 3, Members: 10}); err == nil {
		t.Fatal("10 members over 3 groups accepted")
	}
}
