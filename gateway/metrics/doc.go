// Package metrics is the coordinator's Prometheus instrumentation: one
// registry owned by the server (never the global default registry), the
// [actors.Observer] that turns group and stream actor events into metrics,
// the counters the HTTP layer moves (heartbeats, producer routing,
// admin mutations, rate-limit refusals), and the gauges computed at
// scrape time from what the group actors last decided (per-member
// liveness, shard counts and capacity, shard owners; see
// [Metrics.SetLiveSource]).
//
// Labels are bounded: statuses, states, operations, error codes, and
// stream/group names for per-group gauges (bounded by the number of
// groups). Member ids label only the per-member gauges, capped by
// [WithMaxMembers], and rscoord_shard_owner, one series per held shard.
//
// The caller builds one [Metrics] with [New], gives it to actors.Config as
// Observer and to the gateway, and serves [Metrics.Handler].
package metrics
