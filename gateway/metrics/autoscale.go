package metrics

import "github.com/rscoord/rscoord/actors"

const autoscaleHelp = "Decisions of the streams' autoscaling policies to scale (scale-out, scale-in), taken in mode on or only reported in dry-run, by stream and action."

var _ actors.AutoscaleObserver = (*Metrics)(nil)

// AutoscaleDecision implements [actors.AutoscaleObserver]: one decision
// of a stream's autoscaling policy that was not none.
func (m *Metrics) AutoscaleDecision(prefix, action string) {
	m.autoscale.WithLabelValues(prefix, action).Inc()
}
