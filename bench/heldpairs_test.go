package bench

import (
	"reflect"
	"testing"
	"time"
)

// reportOf is a report with a not-held p99, the server's share within
// 10 ms (negative: not timed) and whether the load was met.
func reportOf(p99 time.Duration, within float64, met bool) HeldReport {
	r := HeldReport{Members: 10, MembersHeld: 10, AskedPerSecond: 100, HeldPerSecond: 100}
	r.NotHeld.P99 = p99
	if within >= 0 {
		r.ServerAtOnce = &ServerTimed{Within10ms: within}
	}
	if !met {
		r.HeldPerSecond = 50
	}
	return r
}

func TestCompareHeld(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		pairs []HeldPair
		want  HeldComparison
	}{
		{"none", nil, HeldComparison{P99Ratios: []float64{}, ServerWithin10ms: [][2]float64{}}},
		{
			"odd count: the middle ratio",
			[]HeldPair{
				{reportOf(50*ms, 0.9, true), reportOf(100*ms, 0.8, true)},
				{reportOf(30*ms, 0.95, true), reportOf(10*ms, 0.99, false)},
				{reportOf(20*ms, -1, true), reportOf(80*ms, 0.7, true)},
			},
			HeldComparison{Pairs: 3, P99Ratios: []float64{0.5, 3, 0.25}, MedianP99Ratio: 0.5, Lower: 2,
				ServerWithin10ms: [][2]float64{{0.9, 0.8}, {0.95, 0.99}}, LoadMet: 2},
		},
		{
			"even count: the mean of the middle two; a tie is not lower",
			[]HeldPair{
				{reportOf(10*ms, 1, true), reportOf(10*ms, 1, true)},
				{reportOf(30*ms, 1, true), reportOf(10*ms, 1, true)},
			},
			HeldComparison{Pairs: 2, P99Ratios: []float64{1, 3}, MedianP99Ratio: 2, Lower: 0,
				ServerWithin10ms: [][2]float64{{1, 1}, {1, 1}}, LoadMet: 2},
		},
		{
			"a baseline that timed nothing has no ratio",
			[]HeldPair{{reportOf(10*ms, -1, false), reportOf(0, -1, false)}},
			HeldComparison{Pairs: 1, P99Ratios: []float64{0}, ServerWithin10ms: [][2]float64{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CompareHeld(tc.pairs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("CompareHeld = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
