// Package metrics is the coordinator's Prometheus instrumentation: one
// registry owned by the server (never the global default registry), the
// [actors.Observer] that turns group and stream actor events into metrics,
// and the counters the HTTP layer moves (heartbeats, producer routing,
// admin mutations, rate-limit refusals).
//
// Labels are bounded: statuses, states, operations, error codes, and
// stream/group names for per-group gauges (bounded by the number of
// groups). No member id is ever a label.
//
// The caller builds one [Metrics] with [New], gives it to actors.Config as
// Observer and to the gateway, and serves [Metrics.Handler].
package metrics
