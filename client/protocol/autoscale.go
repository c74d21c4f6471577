package protocol

import "time"

// Autoscale modes (ours): on scales, dry-run only reports what it would
// do, off (the default) decides nothing.
const (
	AutoscaleOn     = "on"
	AutoscaleDryRun = "dry-run"
	AutoscaleOff    = "off"
)

// Autoscale actions of a decision.
const (
	AutoscaleScaleOut = "scale-out"
	AutoscaleScaleIn  = "scale-in"
	AutoscaleNone     = "none"
)

// AutoscaleRequest is the body of PUT /streams/{p}/autoscale (ours). A
// bound left out is no bound; the other fields left out take their
// defaults (docs/protocol.md, autoscaling).
type AutoscaleRequest struct {
	// Mode is on, dry-run or off; required.
	Mode                     string   `json:"mode"`
	MaxShardLength           *int64   `json:"maxShardLength,omitempty"`
	MaxShardMemoryBytes      *int64   `json:"maxShardMemoryBytes,omitempty"`
	MaxShardAppendsPerSecond *float64 `json:"maxShardAppendsPerSecond,omitempty"`
	// LowWatermark is the fraction of every bound under which every shard
	// must stay for a whole cooldown before the stream scales in.
	LowWatermark    *float64 `json:"lowWatermark,omitempty"`
	MinShards       *int     `json:"minShards,omitempty"`
	MaxShards       *int     `json:"maxShards,omitempty"`
	CooldownSeconds *int64   `json:"cooldownSeconds,omitempty"`
	// RequestedBy names who asks; required: the audit log records it.
	RequestedBy string `json:"requestedBy"`
	Reason      string `json:"reason,omitempty"`
}

// AutoscalePolicy is a stream's autoscaling policy as it applies: the
// defaults filled in, bounds not set left out.
type AutoscalePolicy struct {
	Mode                     string   `json:"mode"`
	MaxShardLength           *int64   `json:"maxShardLength,omitempty"`
	MaxShardMemoryBytes      *int64   `json:"maxShardMemoryBytes,omitempty"`
	MaxShardAppendsPerSecond *float64 `json:"maxShardAppendsPerSecond,omitempty"`
	LowWatermark             float64  `json:"lowWatermark"`
	MinShards                int      `json:"minShards"`
	MaxShards                int      `json:"maxShards"`
	CooldownSeconds          int64    `json:"cooldownSeconds"`
	// RequestedBy is who set the policy last, "" when never set.
	RequestedBy string `json:"requestedBy"`
	// UpdatedAt is when it was set last, left out when never set.
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
}

// AutoscaleDecision is one decision of the policy.
type AutoscaleDecision struct {
	// Action is scale-out, scale-in or none.
	Action     string `json:"action"`
	FromShards int    `json:"fromShards"`
	ToShards   int    `json:"toShards"`
	Reason     string `json:"reason"`
	// At is when it was decided.
	At time.Time `json:"at"`
	// Taken is true when the stream was scaled on it (mode on); a dry
	// run's decisions are reported only.
	Taken bool `json:"taken"`
}

// AutoscaleResponse answers GET and PUT /streams/{p}/autoscale.
type AutoscaleResponse struct {
	Stream string          `json:"stream"`
	Policy AutoscalePolicy `json:"policy"`
	// LastDecision is the last decision to scale (taken or, in a dry
	// run, reported) that the stream record keeps; before the first, the
	// latest decision of none and why; null when none was made yet.
	LastDecision *AutoscaleDecision `json:"lastDecision"`
}
