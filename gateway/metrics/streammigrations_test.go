package metrics_test

import (
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// TestStreamMigrations: rscoord_stream_migrations says, per stream run
// here, how many migrations are in each state (every state exported, at 0
// too), and a stream removed from here has no series left and no longer
// counts in rscoord_migrations.
func TestStreamMigrations(t *testing.T) {
	m := metrics.New()
	m.StreamMigrations("orders", map[protocol.MigrationState]int{protocol.MigrationDraining: 1, protocol.MigrationDeprecated: 2})
	m.StreamMigrations("billing", map[protocol.MigrationState]int{protocol.MigrationDeprecated: 1})
	m.StreamRemoved("billing")

	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	perStream := map[[2]string]float64{}
	total := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case metrics.StreamMigrations:
				perStream[[2]string{labels["stream"], labels["state"]}] = s.GetGauge().GetValue()
			case "rscoord_migrations":
				total[labels["state"]] = s.GetGauge().GetValue()
			}
		}
	}
	tests := []struct {
		stream, state string
		want          float64
		exported      bool
	}{
		{"orders", "DRAINING", 1, true},
		{"orders", "DEPRECATED", 2, true},
		{"orders", "PREPARING", 0, true},
		{"billing", "DEPRECATED", 0, false},
	}
	for _, tc := range tests {
		got, ok := perStream[[2]string{tc.stream, tc.state}]
		if ok != tc.exported || got != tc.want {
			t.Errorf("%s{stream=%q,state=%q} = %v (exported %v), want %v (exported %v)",
				metrics.StreamMigrations, tc.stream, tc.state, got, ok, tc.want, tc.exported)
		}
	}
	if total["DEPRECATED"] != 2 || total["DRAINING"] != 1 {
		t.Errorf("rscoord_migrations = %v, want DEPRECATED 2 (billing removed) and DRAINING 1", total)
	}
}
