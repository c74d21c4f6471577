package metrics_test

import (
	"strconv"
	"testing"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// A group step counts once in the series of its kind and whether it was
// persisted, known kind or not, and its events count in their own
// counters.
func TestGroupStepsCountByKindAndPersistence(t *testing.T) {
	cases := []struct {
		kind      string
		persisted bool
	}{
		{actors.StepHeartbeat, false},
		{actors.StepHeartbeat, true},
		{actors.StepTick, true},
		{actors.StepHeldAnswer, false},
		{"a kind of a later version", true},
	}
	for _, tc := range cases {
		m := metrics.New()
		step := actors.GroupStep{Kind: tc.kind, Persisted: tc.persisted, Events: assign.Events{Joined: []string{"a", "b"}}}
		m.GroupStep("orders", "workers", step)
		m.GroupStep("orders", "workers", actors.GroupStep{Kind: tc.kind, Persisted: tc.persisted})
		steps := seriesValue(t, m, "rscoord_group_steps_total", "kind", tc.kind, "persisted", strconv.FormatBool(tc.persisted))
		other := seriesValue(t, m, "rscoord_group_steps_total", "kind", tc.kind, "persisted", strconv.FormatBool(!tc.persisted))
		joins := seriesValue(t, m, "rscoord_member_joins_total")
		if steps != 2 || other != 0 || joins != 2 {
			t.Errorf("%s persisted=%v: %v steps, %v of the other persistence, %v joins; want 2, 0 and 2",
				tc.kind, tc.persisted, steps, other, joins)
		}
	}
}

// seriesValue is the value of the counter series of family name with the
// label pairs labels, 0 when m exports no such series.
func seriesValue(t *testing.T, m *metrics.Metrics, name string, labels ...string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range s.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return s.GetCounter().GetValue()
		}
	}
	return 0
}
