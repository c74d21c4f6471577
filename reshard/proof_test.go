package reshard

import (
	"errors"
	"slices"
	"testing"
)

func lag(n int64) *int64 { return &n }

func TestProof(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		facts ShardFacts
		want  bool
		why   string
	}{
		{"missing key", ShardFacts{Key: "o:3"}, true, ""},
		{"no group", ShardFacts{Key: "o:3", Exists: true}, true, ""},
		{"all drained", ShardFacts{Key: "o:3", Exists: true, Groups: []GroupLag{{Name: "a", Lag: lag(0)}, {Name: "b", Lag: lag(0)}}}, true, ""},
		{"pending", ShardFacts{Key: "o:3", Exists: true, Groups: []GroupLag{{Name: "a", Pending: 2, Lag: lag(0)}}}, false, "o:3 group a has 2 pending"},
		{"lag unknown", ShardFacts{Key: "o:3", Exists: true, Groups: []GroupLag{{Name: "a"}}}, false, "o:3 group a lag unknown"},
		{"lagging", ShardFacts{Key: "o:3", Exists: true, Groups: []GroupLag{{Name: "a", Lag: lag(0)}, {Name: "b", Lag: lag(4)}}}, false, "o:3 group b lag 4"},
		{"unread", ShardFacts{Key: "o:3", Err: errors.New("timeout")}, false, "o:3: timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Proof(tc.facts)
			if got != tc.want || why != tc.why {
				t.Fatalf("Proof = %v %q, want %v %q", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestDrainingAfterScale(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		draining []int
		from, to int
		want     []int
	}{
		{"scale-in", nil, 8, 2, []int{2, 3, 4, 5, 6, 7}},
		{"to zero", nil, 2, 0, []int{0, 1}},
		{"scale-out", nil, 2, 4, []int{}},
		{"scale-out revives draining", []int{4, 5}, 4, 5, []int{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := drainingAfterScale(tc.draining, tc.from, tc.to); !slices.Equal(got, tc.want) {
				t.Fatalf("= %v, want %v", got, tc.want)
			}
		})
	}
}
