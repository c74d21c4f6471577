package assign

import (
	"slices"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// SetLayout changes the readable shards of g (docs/protocol.md §6.2 and §7):
// shards 0..shardCount-1 that producers route to, plus draining: removed
// shards of a scale-in that stay readable and assigned until they are
// proven drained. Draining entries below shardCount or negative are
// ignored; a negative shardCount is 0.
//
// A change bumps GroupEpoch and MetadataVersion and reassigns; members
// holding shards that are no longer readable get a rebalance deadline like
// any member holding shards outside its target. Setting the same layout
// again changes nothing.
func SetLayout(g *Group, shardCount int, draining []int, now time.Time, cfg Config) Result {
	o := begin(g, now, cfg)
	g.idx = nil // the caller may have edited the group (a load, a repair)
	o.allDeadlines = true
	o.fullAssign = true
	if shardCount < 0 {
		shardCount = 0
	}
	kept := []int{}
	for _, s := range normalize(draining) {
		if s >= shardCount {
			kept = append(kept, s)
		}
	}
	if g.ShardCount != shardCount || !slices.Equal(g.DrainingShards, kept) {
		g.ShardCount = shardCount
		g.DrainingShards = kept
		o.bump()
	}
	o.finish()
	return o.result(protocol.HeartbeatResponse{})
}

// readableShards returns the sorted readable shards of g.
func readableShards(g *Group) []int {
	return span(g.ShardCount, g.DrainingShards)
}

// readable reports whether shard s is readable in g.
func readable(g *Group, s int) bool {
	return (s >= 0 && s < g.ShardCount) || contains(g.DrainingShards, s)
}
