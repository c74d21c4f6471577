package producerit_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

type routeVector struct {
	Key        string `json:"key"`
	ShardCount int    `json:"shardCount"`
	ShardIndex int    `json:"shardIndex"`
}

func loadRouteVectors(t *testing.T) []routeVector {
	t.Helper()
	raw, err := os.ReadFile("../../client/protocol/testdata/routing-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Routes []routeVector `json:"routes"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Routes) == 0 {
		t.Fatal("no routes in the vectors file")
	}
	return v.Routes
}

// TestRouteMatchesVectors checks, for a few shard counts, that the producer
// routes every vector key where the shared vectors say, and that a record
// published with it lands in that shard's stream.
func TestRouteMatchesVectors(t *testing.T) {
	vectors := loadRouteVectors(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.client(t)
			for _, count := range []int{1, 3, 7, 16} {
				t.Run(strconv.Itoa(count), func(t *testing.T) {
					f := newFixture(t, rdb, count)
					p := f.producer(t)
					checked := 0
					for _, v := range vectors {
						if v.ShardCount != count {
							continue
						}
						checked++
						idx, key, err := p.Route(v.Key)
						if err != nil {
							t.Fatal(err)
						}
						if idx != v.ShardIndex || idx != protocol.Route(v.Key, count) || key != protocol.StreamKey(f.prefix, v.ShardIndex) {
							t.Fatalf("Route(%q) over %d shards = %d %s, want %d", v.Key, count, idx, key, v.ShardIndex)
						}
						gotKey, id, err := p.Publish(context.Background(), v.Key, []any{"partitionKey", v.Key})
						if err != nil {
							t.Fatal(err)
						}
						if gotKey != key {
							t.Fatalf("Publish(%q) wrote to %s, want %s", v.Key, gotKey, key)
						}
						if m := entry(t, rdb, key, id); m.Values["partitionKey"] != v.Key {
							t.Fatalf("entry %s in %s = %v, want partitionKey %q", id, key, m.Values, v.Key)
						}
					}
					if checked == 0 {
						t.Fatalf("no vector for %d shards", count)
					}
				})
			}
		})
	}
}
