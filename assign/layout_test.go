package assign

import (
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestSetLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		count        int
		draining     []int
		wantReadable []int
		changed      bool
	}{
		{"same layout", 4, nil, []int{0, 1, 2, 3}, false},
		{"same layout, empty draining", 4, []int{}, []int{0, 1, 2, 3}, false},
		{"grow", 6, nil, []int{0, 1, 2, 3, 4, 5}, true},
		{"shrink keeps removed shards draining", 2, []int{3, 2, 2}, []int{0, 1, 2, 3}, true},
		{"draining below the count is ignored", 3, []int{1, 3}, []int{0, 1, 2, 3}, true},
		{"retire", 2, nil, []int{0, 1}, true},
		{"scale to zero", 0, nil, []int{}, true},
		{"negative count is zero", -3, nil, []int{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _, now := stable(t, 4, "a", "b")
			version, epoch := g.MetadataVersion, g.GroupEpoch
			res := SetLayout(g, tc.count, tc.draining, now, testConfig())
			if got := readableShards(g); !slices.Equal(got, tc.wantReadable) {
				t.Errorf("readable %v, want %v", got, tc.wantReadable)
			}
			if res.Persist != tc.changed || (g.MetadataVersion > version) != tc.changed || (g.GroupEpoch > epoch) != tc.changed {
				t.Errorf("persist %v version %d→%d epoch %d→%d, changed %v", res.Persist, version, g.MetadataVersion, epoch, g.GroupEpoch, tc.changed)
			}
			if g.DrainingShards == nil {
				t.Errorf("draining is nil")
			}
			if v := CheckInvariants(g); len(v) > 0 {
				t.Errorf("invariants: %v", v)
			}
			var all []int
			for _, s := range g.Target {
				all = append(all, s...)
			}
			if slices.Sort(all); !slices.Equal(all, tc.wantReadable) {
				t.Errorf("assigned %v, want every readable shard", all)
			}
		})
	}
}

// TestScaleInHandOff: shards removed from the layout are revoked like any
// moved shard, and their holders get a rebalance deadline.
func TestScaleInHandOff(t *testing.T) {
	t.Parallel()
	g, cs, now := stable(t, 6, "a", "b")
	SetLayout(g, 4, nil, now, testConfig())
	now = now.Add(10 * time.Millisecond)
	r := cs[1].beat(now).Response // b held 3, 4, 5; 2 is still a's
	if !slices.Equal(assigned(r), []int{3}) || !slices.Equal(pending(r), []int{2}) || r.HeartbeatIntervalMs != 200 {
		t.Fatalf("b after the scale-in: %+v", r)
	}
	if g.Members["b"].RebalanceDeadline.IsZero() {
		t.Errorf("b holds retired shards without a deadline")
	}
	settle(t, now, cs...)
	if g.State != protocol.GroupStable || !g.Members["b"].RebalanceDeadline.IsZero() {
		t.Errorf("state %s", g.State)
	}
}
