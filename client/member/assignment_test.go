package member

import (
	"reflect"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestSanitizeShards(t *testing.T) {
	tests := []struct {
		name string
		in   []protocol.Shard
		want []int
	}{
		{"nil", nil, []int{}},
		{"empty", []protocol.Shard{}, []int{}},
		{"sorted stays", protocol.Shards([]int{0, 1, 5}), []int{0, 1, 5}},
		{"unsorted is sorted", protocol.Shards([]int{5, 0, 3}), []int{0, 3, 5}},
		{"duplicates dropped", protocol.Shards([]int{2, 2, 1, 2}), []int{1, 2}},
		{"negatives dropped", protocol.Shards([]int{-1, 3, -7, 0}), []int{0, 3}},
		{"all negative", protocol.Shards([]int{-1, -2}), []int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sanitizeShards(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("sanitizeShards(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDiffShards(t *testing.T) {
	tests := []struct {
		name              string
		owned, assigned   []int
		kept, added, lost []int
	}{
		{"nothing", nil, nil, []int{}, []int{}, []int{}},
		{"join", nil, []int{0, 1, 2}, []int{}, []int{0, 1, 2}, []int{}},
		{"steady", []int{1, 3}, []int{1, 3}, []int{1, 3}, []int{}, []int{}},
		{"lose all", []int{0, 4}, []int{}, []int{}, []int{}, []int{0, 4}},
		{"hand-off", []int{0, 1, 2, 3}, []int{0, 1}, []int{0, 1}, []int{}, []int{2, 3}},
		{"gain after hand-off", []int{2}, []int{2, 3}, []int{2}, []int{3}, []int{}},
		{"interleaved", []int{0, 2, 4, 6}, []int{1, 2, 3, 6, 7}, []int{2, 6}, []int{1, 3, 7}, []int{0, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := diffShards(tt.owned, tt.assigned)
			want := shardDiff{Kept: tt.kept, Added: tt.added, Lost: tt.lost}
			if !reflect.DeepEqual(d, want) {
				t.Fatalf("diffShards(%v, %v) = %+v, want %+v", tt.owned, tt.assigned, d, want)
			}
		})
	}
}

func TestPlanFor(t *testing.T) {
	owned := []int{0, 1, 2}
	assigned := []int{1, 2, 3}
	tests := []struct {
		status protocol.Status
		want   plan
	}{
		{protocol.StatusOK, plan{Own: []int{1, 2, 3}, Start: []int{3}, Revoke: []int{0}, Renew: true, Resume: true, Known: true}},
		// SYNC_METADATA and REVOKE_PENDING keep only what is read and
		// assigned, revoke the rest, start nothing.
		{protocol.StatusSyncMetadata, plan{Own: []int{1, 2}, Start: []int{}, Revoke: []int{0}, Renew: true, Known: true}},
		{protocol.StatusRevokePending, plan{Own: []int{1, 2}, Start: []int{}, Revoke: []int{0}, Renew: true, Known: true}},
		// RETRY keeps everything and does not renew the lease.
		{protocol.StatusRetry, plan{Own: owned, Start: []int{}, Revoke: []int{}, Known: true}},
		{protocol.StatusUnknownMemberID, plan{Own: []int{}, Start: []int{}, Revoke: []int{}, Rejoin: true, Known: true}},
		{protocol.StatusFencedMemberEpoch, plan{Own: []int{}, Start: []int{}, Revoke: []int{}, Rejoin: true, Known: true}},
		{protocol.StatusUnsupportedProtocol, plan{Own: []int{}, Start: []int{}, Revoke: []int{}, Fatal: true, Known: true}},
		{protocol.StatusInvalidRequest, plan{Own: []int{}, Start: []int{}, Revoke: []int{}, Fatal: true, Known: true}},
		{"SOMETHING_NEW", plan{Own: owned, Start: []int{}, Revoke: []int{}}},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			got := planFor(tt.status, owned, assigned)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("planFor(%s) = %+v, want %+v", tt.status, got, tt.want)
			}
		})
	}
}
