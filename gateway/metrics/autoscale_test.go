package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rscoord/rscoord/gateway/metrics"
)

// TestAutoscaleDecisionsCountByStreamAndAction: every decision to scale the
// stream actors report is one count of its stream and action.
func TestAutoscaleDecisionsCountByStreamAndAction(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.AutoscaleDecision("orders", "scale-out")
	m.AutoscaleDecision("orders", "scale-out")
	m.AutoscaleDecision("payments", "scale-in")
	want := `# HELP rscoord_autoscale_decisions_total Decisions of the streams' autoscaling policies to scale (scale-out, scale-in), taken in mode on or only reported in dry-run, by stream and action.
# TYPE rscoord_autoscale_decisions_total counter
rscoord_autoscale_decisions_total{action="scale-in",stream="payments"} 1
rscoord_autoscale_decisions_total{action="scale-out",stream="orders"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "rscoord_autoscale_decisions_total"); err != nil {
		t.Error(err)
	}
}
