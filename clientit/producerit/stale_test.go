package producerit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
)

func scaledIn(t *testing.T, f *fixture) {
	t.Helper()
	id := f.scale(t, 2)
	f.complete(t, id)
	if err := f.rdb.Del(context.Background(), protocol.StreamKey(f.prefix, 2)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.Del(context.Background(), protocol.StreamKey(f.prefix, 3)).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestStaleRouteRetry(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f := newFixture(t, b.client(t), 4)
			p := f.producer(t, producer.WithRefreshInterval(time.Hour), producer.WithRoutingLease(2*time.Hour))
			key := keyRoutedTo(t, 3, 4)
			if _, k, _ := p.Route(key); k != protocol.StreamKey(f.prefix, 3) {
				t.Fatalf("before the scale %q routes to %s, want shard 3", key, k)
			}
			scaledIn(t, f)

			streamKey, id, err := p.Publish(context.Background(), key, []any{"partitionKey", key})
			if err != nil {
				t.Fatal(err)
			}
			want := protocol.StreamKey(f.prefix, protocol.Route(key, 2))
			if streamKey != want {
				t.Fatalf("Publish(%q) after scale-in wrote to %s, want %s", key, streamKey, want)
			}
			entry(t, f.rdb, streamKey, id)
			for _, gone := range []int{2, 3} {
				if n, _ := f.rdb.Exists(context.Background(), protocol.StreamKey(f.prefix, gone)).Result(); n != 0 {
					t.Fatalf("retired shard %d was recreated", gone)
				}
			}
			if r, _ := p.Routing(); r.ShardCount != 2 {
				t.Fatalf("routing after the retry has %d shards, want 2", r.ShardCount)
			}
		})
	}
}

func TestStaleRouteWithoutRetryFails(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 4)
	p := f.producer(t, producer.WithRefreshInterval(time.Hour), producer.WithRoutingLease(2*time.Hour),
		producer.WithMaxAttempts(1))
	key := keyRoutedTo(t, 3, 4)
	scaledIn(t, f)
	_, _, err := p.Publish(context.Background(), key, []any{"f", "v"})
	if !errors.Is(err, producer.ErrShardStreamMissing) {
		t.Fatalf("Publish = %v, want ErrShardStreamMissing", err)
	}
	if n := f.totalLen(t, 4); n != 0 {
		t.Fatalf("%d records written; want none", n)
	}
}

func TestStaleRouteBatchRetriesInOrder(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f := newFixture(t, b.client(t), 4)
			p := f.producer(t, producer.WithRefreshInterval(time.Hour), producer.WithRoutingLease(2*time.Hour))
			scaledIn(t, f)
			keys := []string{keyRoutedTo(t, 0, 4), keyRoutedTo(t, 2, 4), keyRoutedTo(t, 3, 4), keyRoutedTo(t, 1, 4)}
			var records []producer.Record
			for i := range 40 {
				k := keys[i%len(keys)]
				records = append(records, producer.Record{PartitionKey: k, Fields: []any{"partitionKey", k, "seq", i}})
			}
			results := p.PublishBatch(context.Background(), records)
			checkBatch(t, f, records, results, 2)
		})
	}
}

// checkBatch checks every result against the record at its index: written
// to the shard of its key among shards, with its fields, and, per key, in
// record order.
func checkBatch(t *testing.T, f *fixture, records []producer.Record, results []producer.Result, shards int) {
	t.Helper()
	if len(results) != len(records) {
		t.Fatalf("%d results for %d records", len(results), len(records))
	}
	lastID := map[string]string{}
	for i, r := range results {
		rec := records[i]
		if r.Err != nil {
			t.Fatalf("record %d: %v", i, r.Err)
		}
		if r.ID == "" {
			t.Fatalf("record %d: no id", i)
		}
		want := protocol.StreamKey(f.prefix, protocol.Route(rec.PartitionKey, shards))
		if r.StreamKey != want {
			t.Fatalf("record %d (%s) written to %s, want %s", i, rec.PartitionKey, r.StreamKey, want)
		}
		m := entry(t, f.rdb, r.StreamKey, r.ID)
		if got, want := m.Values["seq"], fmt.Sprint(rec.Fields.([]any)[3]); got != want {
			t.Fatalf("record %d: entry %s has seq %v, want %s", i, r.ID, got, want)
		}
		if prev, ok := lastID[rec.PartitionKey]; ok && !idLess(prev, r.ID) {
			t.Fatalf("record %d: id %s not after %s of the previous record of %s", i, r.ID, prev, rec.PartitionKey)
		}
		lastID[rec.PartitionKey] = r.ID
	}
}

// idLess compares two stream entry ids "ms-seq".
func idLess(a, b string) bool {
	var am, as, bm, bs uint64
	fmt.Sscanf(a, "%d-%d", &am, &as)
	fmt.Sscanf(b, "%d-%d", &bm, &bs)
	return am < bm || am == bm && as < bs
}
