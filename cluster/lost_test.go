package cluster

import (
	"slices"
	"testing"
)

func TestLostClaims(t *testing.T) {
	held := map[string]Fence{"a": {Key: "k/a", CreateRevision: 10}, "b": {Key: "k/b", CreateRevision: 20}}
	for _, tc := range []struct {
		name    string
		rev     int64
		created map[string]int64
		want    []string
	}{
		{"copy holds both keys", 25, map[string]int64{"a": 10, "b": 20}, nil},
		{"a deleted", 25, map[string]int64{"b": 20}, []string{"a"}},
		{"a deleted and claimed again by another", 25, map[string]int64{"a": 22, "b": 20}, []string{"a"}},
		{"copy older than b's claim: b not judged", 15, map[string]int64{"a": 10}, nil},
		{"copy at b's claim without it", 20, map[string]int64{"a": 10}, []string{"b"}},
		{"both gone", 30, map[string]int64{}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lostClaims(held, tc.rev, tc.created); !slices.Equal(got, tc.want) {
				t.Fatalf("lostClaims = %v, want %v", got, tc.want)
			}
		})
	}
}
