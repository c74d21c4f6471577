package bench

import (
	"slices"
	"time"
)

// Latencies summarizes request latencies.
type Latencies struct {
	P50  time.Duration `json:"p50"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p999"`
	Max  time.Duration `json:"max"`
}

// summarize sorts samples in place and picks the quantiles.
func summarize(samples []time.Duration) Latencies {
	if len(samples) == 0 {
		return Latencies{}
	}
	slices.Sort(samples)
	at := func(q float64) time.Duration {
		i := int(q * float64(len(samples)-1))
		return samples[i]
	}
	return Latencies{P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: samples[len(samples)-1]}
}
