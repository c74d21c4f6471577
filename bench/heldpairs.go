package bench

import "slices"

// HeldPair is two held runs back to back on one machine: the build
// measured and a baseline (the build before a change, say). At 20,000
// members on a shared machine the same build's not-held p99 ranged over
// an order of magnitude from one run to the next (docs/benchmarks.md); two
// runs minutes apart differ more than two builds do, while the two runs of
// a pair share the machine's state.
type HeldPair struct {
	Run      HeldReport `json:"run"`
	Baseline HeldReport `json:"baseline"`
}

// HeldComparison sums up pairs of held runs.
type HeldComparison struct {
	Pairs int `json:"pairs"`
	// P99Ratios is each pair's not-held p99, the run's over the
	// baseline's (below 1: the run was faster); 0 when the baseline timed
	// nothing.
	P99Ratios []float64 `json:"p99Ratios"`
	// MedianP99Ratio is the median of P99Ratios.
	MedianP99Ratio float64 `json:"medianP99Ratio"`
	// Lower counts the pairs whose run had the lower not-held p99.
	Lower int `json:"lower"`
	// ServerWithin10ms is each pair's share of the not-held answers the
	// server itself timed within 10 ms, run and baseline; a pair is left
	// out when either run lacks the server's timing.
	ServerWithin10ms [][2]float64 `json:"serverWithin10ms"`
	// LoadMet counts the pairs in which the members of both runs got the
	// held answers they asked (HeldReport.LoadMet): only there does a p99
	// compare the server under the load asked.
	LoadMet int `json:"loadMet"`
}

// CompareHeld compares the runs of each pair.
func CompareHeld(pairs []HeldPair) HeldComparison {
	c := HeldComparison{Pairs: len(pairs), P99Ratios: []float64{}, ServerWithin10ms: [][2]float64{}}
	for _, p := range pairs {
		ratio := 0.0
		if base := p.Baseline.NotHeld.P99; base > 0 {
			ratio = float64(p.Run.NotHeld.P99) / float64(base)
		}
		c.P99Ratios = append(c.P99Ratios, ratio)
		if p.Run.NotHeld.P99 < p.Baseline.NotHeld.P99 {
			c.Lower++
		}
		if p.Run.ServerAtOnce != nil && p.Baseline.ServerAtOnce != nil {
			c.ServerWithin10ms = append(c.ServerWithin10ms, [2]float64{p.Run.ServerAtOnce.Within10ms, p.Baseline.ServerAtOnce.Within10ms})
		}
		runMet, _ := p.Run.LoadMet()
		baseMet, _ := p.Baseline.LoadMet()
		if runMet && baseMet {
			c.LoadMet++
		}
	}
	c.MedianP99Ratio = median(c.P99Ratios)
	return c
}

// median is the middle of xs (the mean of the two middle ones for an even
// count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}
