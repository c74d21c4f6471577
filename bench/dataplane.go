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
	// BestRatio is the baseline's fastest phase over the subject's: what
	// each costs when other work leaves it alone. 0 where not measured.
	BestRatio float64 `json:"bestRatio,omitempty"`
	// MinRatio and MaxRatio are the spread of RoundRatios.
	MinRatio float64 `json:"minRatio,omitempty"`
	MaxRatio float64 `json:"maxRatio,omitempty"`
	// SubjectCPU and BaselineCPU are what one record cost in CPU over the
	// timed windows; zero where not measured.
	SubjectCPU  CPUCost `json:"subjectCpu"`
	BaselineCPU CPUCost `json:"baselineCpu"`
}

// CPUCost is CPU time per record: of the consuming process (the bench's,
// which runs subject and baseline alike) and of redis-server (0 when the
// bench cannot read it).
type CPUCost struct {
	Process time.Duration `json:"processPerRecord"`
	Redis   time.Duration `json:"redisPerRecord,omitempty"`
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
