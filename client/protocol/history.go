package protocol

import "time"

// HistoryResponse answers GET /monitoring/streams/{p}/groups/{g}/history:
// the recent samples the coordinator's metrics collection kept of one
// group, oldest first.
type HistoryResponse struct {
	StreamPrefix  string `json:"streamPrefix"`
	ConsumerGroup string `json:"consumerGroup"`
	// IntervalMs is the collection interval (--metrics-interval), the
	// time between two samples.
	IntervalMs int64 `json:"intervalMs"`
	// WindowMs is how far back the samples reach at most.
	WindowMs int64 `json:"windowMs"`
	// Tracked is false when the bound on the samples the coordinator
	// keeps left this group (or some of its shards) out: their lists are
	// then empty.
	Tracked bool `json:"tracked"`
	// Group is the group's totals over its shards.
	Group []HistorySample `json:"group"`
	// Shards are the shards' own samples, by shard index.
	Shards []ShardHistory `json:"shards"`
}

// ShardHistory is one shard's recent samples, oldest first.
type ShardHistory struct {
	ShardIndex int             `json:"shardIndex"`
	Samples    []HistorySample `json:"samples"`
}

// HistorySample is what one collection round read. A figure Redis could
// not tell is null.
type HistorySample struct {
	At time.Time `json:"at"`
	// Length is the stream's length (0 for a missing key).
	Length int64 `json:"length"`
	// Pending is the group's delivered and unacknowledged entries.
	Pending int64 `json:"pending"`
	// Lag is the group's entries not yet delivered.
	Lag *int64 `json:"lag"`
	// AppendsPerSecond is the rise of the length since the previous
	// sample, per second; null at the first sample, after a gap, or when
	// the length fell (a trim or a deletion hides the appends).
	AppendsPerSecond *float64 `json:"appendsPerSecond"`
	// AcksPerSecond is the entries acknowledged since the previous sample
	// per second: the appends, less the rise of the lag (what was not
	// delivered) and of the pending count (what was delivered and not
	// acknowledged). Null whenever one of those is unknown.
	AcksPerSecond *float64 `json:"acksPerSecond"`
}
