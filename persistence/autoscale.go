package persistence

import "time"

// AutoscaleRecord is a stream's autoscaling policy as its record keeps it,
// with the last decision that was not none. A bound of zero is no bound.
type AutoscaleRecord struct {
	// Mode is "on", "dry-run" or "off".
	Mode                     string
	MaxShardLength           int64
	MaxShardMemoryBytes      int64
	MaxShardAppendsPerSecond float64
	LowWatermark             float64
	MinShards, MaxShards     int
	Cooldown                 time.Duration
	RequestedBy              string
	UpdatedAt                time.Time
	// LastDecision is the last decision to scale, taken or (dry run)
	// reported; nil before the first. A dry run's cooldown counts from it.
	LastDecision *AutoscaleDecisionRecord
}

// AutoscaleDecisionRecord is one decision of the autoscaling policy.
type AutoscaleDecisionRecord struct {
	Action   string
	From, To int
	Reason   string
	At       time.Time
	Taken    bool
}

type autoscaleV1 struct {
	Mode                     string               `json:"mode"`
	MaxShardLength           int64                `json:"maxShardLength,omitempty"`
	MaxShardMemoryBytes      int64                `json:"maxShardMemoryBytes,omitempty"`
	MaxShardAppendsPerSecond float64              `json:"maxShardAppendsPerSecond,omitempty"`
	LowWatermark             float64              `json:"lowWatermark"`
	MinShards                int                  `json:"minShards"`
	MaxShards                int                  `json:"maxShards"`
	CooldownMs               int64                `json:"cooldownMs"`
	RequestedBy              string               `json:"requestedBy,omitempty"`
	UpdatedAt                time.Time            `json:"updatedAt,omitzero"`
	LastDecision             *autoscaleDecisionV1 `json:"lastDecision,omitempty"`
}

type autoscaleDecisionV1 struct {
	Action string    `json:"action"`
	From   int       `json:"from"`
	To     int       `json:"to"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
	Taken  bool      `json:"taken,omitempty"`
}

func encodeAutoscale(r *AutoscaleRecord) *autoscaleV1 {
	if r == nil {
		return nil
	}
	out := &autoscaleV1{
		Mode: r.Mode, MaxShardLength: r.MaxShardLength, MaxShardMemoryBytes: r.MaxShardMemoryBytes,
		MaxShardAppendsPerSecond: r.MaxShardAppendsPerSecond, LowWatermark: r.LowWatermark,
		MinShards: r.MinShards, MaxShards: r.MaxShards, CooldownMs: r.Cooldown.Milliseconds(),
		RequestedBy: r.RequestedBy, UpdatedAt: utc(r.UpdatedAt),
	}
	if d := r.LastDecision; d != nil {
		out.LastDecision = &autoscaleDecisionV1{Action: d.Action, From: d.From, To: d.To, Reason: d.Reason, At: utc(d.At), Taken: d.Taken}
	}
	return out
}

func decodeAutoscale(r *autoscaleV1) *AutoscaleRecord {
	if r == nil {
		return nil
	}
	out := &AutoscaleRecord{
		Mode: r.Mode, MaxShardLength: r.MaxShardLength, MaxShardMemoryBytes: r.MaxShardMemoryBytes,
		MaxShardAppendsPerSecond: r.MaxShardAppendsPerSecond, LowWatermark: r.LowWatermark,
		MinShards: r.MinShards, MaxShards: r.MaxShards, Cooldown: time.Duration(r.CooldownMs) * time.Millisecond,
		RequestedBy: r.RequestedBy, UpdatedAt: utc(r.UpdatedAt),
	}
	if d := r.LastDecision; d != nil {
		out.LastDecision = &AutoscaleDecisionRecord{Action: d.Action, From: d.From, To: d.To, Reason: d.Reason, At: utc(d.At), Taken: d.Taken}
	}
	return out
}
