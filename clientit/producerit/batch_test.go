package producerit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/internal/poll"
)

func TestPublishBatchResultsInOrder(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f := newFixture(t, b.client(t), 8)
			p := f.producer(t)
			records := make([]producer.Record, 500)
			for i := range records {
				k := fmt.Sprintf("user-%d", i%37)
				records[i] = producer.Record{PartitionKey: k, Fields: []any{"partitionKey", k, "seq", i}}
			}
			results := p.PublishBatch(context.Background(), records)
			checkBatch(t, f, records, results, 8)
			if n := f.totalLen(t, 8); n != int64(len(records)) {
				t.Fatalf("XLEN total = %d, want %d", n, len(records))
			}
		})
	}
}

func TestPublishBatchInvalidRecordFailsAlone(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 2)
	p := f.producer(t)
	results := p.PublishBatch(context.Background(), []producer.Record{
		{PartitionKey: "a", Fields: []any{"f", 1}},
		{PartitionKey: "b", Fields: []any{"odd"}},
		{PartitionKey: "c", Fields: map[string]any{"f": 3}},
	})
	if results[0].Err != nil || results[2].Err != nil || results[0].ID == "" || results[2].ID == "" {
		t.Fatalf("valid records failed: %+v", results)
	}
	if !errors.Is(results[1].Err, producer.ErrInvalidFields) || results[1].ID != "" {
		t.Fatalf("invalid record = %+v, want ErrInvalidFields", results[1])
	}
	if n := f.totalLen(t, 2); n != 2 {
		t.Fatalf("XLEN total = %d, want 2", n)
	}
	if got := p.PublishBatch(context.Background(), nil); len(got) != 0 {
		t.Fatalf("empty batch answered %d results", len(got))
	}
}

func TestObserveMetadataVersionRefreshesAtOnce(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 2)
	p := f.producer(t, producer.WithRefreshInterval(time.Hour), producer.WithRoutingLease(2*time.Hour))
	before, _ := p.Routing()
	f.scale(t, 6)
	p.ObserveMetadataVersion(before.MetadataVersion) // not newer: nothing happens
	var r producer.Routing
	if !poll.Stays(100*time.Millisecond, 10*time.Millisecond, func() bool { r, _ = p.Routing(); return r.ShardCount == 2 }) {
		t.Fatalf("routing refreshed on a version that was not newer: %+v", r)
	}
	p.ObserveMetadataVersion(before.MetadataVersion + 1)
	if !poll.Wait(5*time.Second, 20*time.Millisecond, func() bool { r, _ = p.Routing(); return r.ShardCount == 6 }) {
		t.Fatalf("routing still %+v 5 s after a newer metadataVersion was observed", r)
	}
	if r.MetadataVersion <= before.MetadataVersion {
		t.Fatalf("6-shard routing with metadataVersion %d, not above %d", r.MetadataVersion, before.MetadataVersion)
	}
}

func TestBackgroundRefreshFollowsScaleOut(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 2)
	p := f.producer(t, producer.WithRefreshInterval(50*time.Millisecond), producer.WithRoutingLease(time.Second))
	f.scale(t, 5)
	if !poll.Wait(5*time.Second, 20*time.Millisecond, func() bool { r, _ := p.Routing(); return r.ShardCount == 5 }) {
		t.Fatal("background refresh did not pick up the scale-out within 5 s")
	}
}
