package producer

import (
	"fmt"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// routing is one immutable snapshot of the coordinator's producer routing.
// The producer swaps whole snapshots; nothing in one ever changes.
type routing struct {
	gen             uint64    // position in the producer's sequence of snapshots
	metadataVersion int64     // the group's metadataVersion when fetched
	keys            []string  // keys[i] is the stream key of shard i
	fetchedAt       time.Time // with its monotonic reading
	// fetchedWall is fetchedAt on the wall clock alone (see age).
	fetchedWall time.Time
	// serverLease is the coordinator's routing lease (routingLeaseMs); 0
	// when it did not say.
	serverLease time.Duration
}

// Routing is a copy of the routing a producer currently uses.
type Routing struct {
	// ShardCount is the number of shards records are routed over.
	ShardCount int
	// MetadataVersion is the group's metadataVersion the routing came with.
	MetadataVersion int64
	// StreamKeys are the shard stream keys, index = shard index.
	StreamKeys []string
	// FetchedAt is when the routing request that produced it was sent; the
	// routing lease runs from here.
	FetchedAt time.Time
}

// newRouting checks a routing response for the producer's stream and turns
// it into a snapshot. The response is cleaned here, at the boundary: a
// response for another stream, or whose shard list is not exactly
// 0..shardCount-1 with the §1 keys, is refused rather than routed over,
// since routing on it would write records where no consumer reads.
func newRouting(prefix string, resp protocol.ProducerRoutingResponse, fetchedAt time.Time) (*routing, error) {
	if resp.StreamPrefix != prefix {
		return nil, fmt.Errorf("routing answer is for stream %q, want %q", resp.StreamPrefix, prefix)
	}
	if resp.ShardCount < 0 || resp.ShardCount > protocol.MaxShardCount {
		return nil, fmt.Errorf("routing answer has shardCount %d, want 0 to %d", resp.ShardCount, protocol.MaxShardCount)
	}
	if len(resp.Shards) != resp.ShardCount {
		return nil, fmt.Errorf("routing answer lists %d shards for shardCount %d", len(resp.Shards), resp.ShardCount)
	}
	keys := make([]string, resp.ShardCount)
	for i, s := range resp.Shards {
		want := protocol.StreamKey(prefix, i)
		if s.ShardIndex != i || s.StreamKey != want {
			return nil, fmt.Errorf("routing answer lists shard %d as {%d %q}, want {%d %q}", i, s.ShardIndex, s.StreamKey, i, want)
		}
		keys[i] = want
	}
	return &routing{metadataVersion: resp.MetadataVersion, keys: keys, fetchedAt: fetchedAt, fetchedWall: fetchedAt.Round(0),
		serverLease: time.Duration(max(resp.RoutingLeaseMs, 0)) * time.Millisecond}, nil
}

// route is the shard index and stream key of partitionKey; ErrNoShards when
// the stream has none.
func (r *routing) route(partitionKey string) (int, string, error) {
	if len(r.keys) == 0 {
		return 0, "", ErrNoShards
	}
	i := protocol.Route(partitionKey, len(r.keys))
	return i, r.keys[i], nil
}

// expired reports whether the routing lease has passed at now.
func (r *routing) expired(now time.Time, lease time.Duration) bool {
	return r.age(now) > r.lease(lease)
}

// age is how long before now r was fetched: the longer of what the
// monotonic and the wall clock say. The monotonic clock stops while the
// machine is suspended and the coordinator's lease does not: a producer
// that wakes after a suspension longer than its lease must not publish on
// routing the coordinator may have retired (its records would never be
// read). A wall-clock step back cannot make routing younger than the
// monotonic clock says; a step forward ages it, so it is refreshed sooner,
// the safe side.
func (r *routing) age(now time.Time) time.Duration {
	return max(now.Sub(r.fetchedAt), now.Round(0).Sub(r.fetchedWall))
}

// lease is how long r may be used: own, the producer's WithRoutingLease,
// or the coordinator's shorter routing lease. Writing on routing older
// than the coordinator's could reach a removed shard that has retired
// (its records never read).
func (r *routing) lease(own time.Duration) time.Duration {
	if r.serverLease > 0 {
		return min(own, r.serverLease)
	}
	return own
}

func (r *routing) export() Routing {
	return Routing{
		ShardCount:      len(r.keys),
		MetadataVersion: r.metadataVersion,
		StreamKeys:      append([]string(nil), r.keys...),
		FetchedAt:       r.fetchedAt,
	}
}
