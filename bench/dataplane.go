package bench

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordclient"
)

// DataplaneConfig sizes a data-plane comparison. The stream must exist on
// the coordinator with Shards shards, and its shard keys in Redis.
type DataplaneConfig struct {
	Coordinator string
	// Credentials authenticate every call; the zero value sends none.
	Credentials coordclient.Credentials
	Redis       redis.UniversalClient
	Stream      string
	Shards      int
	// Records per phase and round.
	Records int
	// Batch is the records per pipeline (PublishBatch, or one raw pipeline).
	Batch int
	// Conns is the number of concurrent publishers.
	Conns int
	// Rounds alternates the two phases this many times, so that a noisy
	// neighbour hurts both alike.
	Rounds int
}

// Comparison is a measured subject against its baseline from the same run.
type Comparison struct {
	Name     string  `json:"name"`
	Subject  Rate    `json:"subject"`
	Baseline Rate    `json:"baseline"`
	Ratio    float64 `json:"ratio"`
	// Target is the ratio the subject should reach; 0 when the caller
	// sets it.
	Target float64 `json:"target,omitempty"`
	// RoundRatios are the subject's rate over the baseline's of each
	// round, and MedianRatio their median: on a shared machine one slow
	// phase moves Ratio (rates summed over rounds) a lot and the median
	// little. Empty and 0 where not measured per round.
	RoundRatios []float64 `json:"roundRatios,omitempty"`
	MedianRatio float64   `json:"medianRatio,omitempty"`
}

// Rate is records moved over the time they took, summed over rounds.
type Rate struct {
	Records   int           `json:"records"`
	Elapsed   time.Duration `json:"elapsed"`
	PerSecond float64       `json:"perSecond"`
}

func (r *Rate) add(records int, d time.Duration) {
	r.Records += records
	r.Elapsed += d
	r.PerSecond = float64(r.Records) / r.Elapsed.Seconds()
}
