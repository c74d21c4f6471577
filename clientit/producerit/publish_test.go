package producerit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
)

func TestPublishLandsInRoutedShard(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rdb := b.client(t)
			f := newFixture(t, rdb, 4)
			p := f.producer(t)
			ctx := context.Background()
			perShard := make([]int64, 4)
			for i := range 60 {
				key := fmt.Sprintf("customer-%d", i)
				streamKey, id, err := p.Publish(ctx, key, map[string]any{"partitionKey": key, "seq": i})
				if err != nil {
					t.Fatal(err)
				}
				shard := protocol.Route(key, 4)
				if want := protocol.StreamKey(f.prefix, shard); streamKey != want {
					t.Fatalf("Publish(%q) wrote to %s, want %s", key, streamKey, want)
				}
				m := entry(t, rdb, streamKey, id)
				if m.Values["partitionKey"] != key || m.Values["seq"] != fmt.Sprint(i) {
					t.Fatalf("entry %s = %v", id, m.Values)
				}
				perShard[shard]++
			}
			for i, want := range perShard {
				if got, _ := rdb.XLen(ctx, protocol.StreamKey(f.prefix, i)).Result(); got != want {
					t.Fatalf("XLEN shard %d = %d, want %d", i, got, want)
				}
			}
		})
	}
}

func TestPublishFieldShapes(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 2)
	p := f.producer(t)
	tests := []struct {
		name    string
		fields  any
		wantErr error
		want    map[string]any
	}{
		{"map any", map[string]any{"a": 1, "b": "x"}, nil, map[string]any{"a": "1", "b": "x"}},
		{"map string", map[string]string{"a": "1"}, nil, map[string]any{"a": "1"}},
		{"pairs any", []any{"a", 1, "b", 2}, nil, map[string]any{"a": "1", "b": "2"}},
		{"pairs string", []string{"a", "z"}, nil, map[string]any{"a": "z"}},
		{"empty map", map[string]any{}, producer.ErrInvalidFields, nil},
		{"odd pairs", []any{"a"}, producer.ErrInvalidFields, nil},
		{"nil", nil, producer.ErrInvalidFields, nil},
		{"struct", struct{ A int }{1}, producer.ErrInvalidFields, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.totalLen(t, 2)
			key, id, err := p.Publish(context.Background(), "k", tc.fields)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Publish = %v, want %v", err, tc.wantErr)
				}
				if after := f.totalLen(t, 2); after != before {
					t.Fatalf("a rejected record was written: XLEN %d → %d", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := entry(t, f.rdb, key, id)
			if fmt.Sprint(m.Values) != fmt.Sprint(tc.want) {
				t.Fatalf("entry = %v, want %v", m.Values, tc.want)
			}
		})
	}
}

func TestMaxLenTrims(t *testing.T) {
	const records, maxLen = 1500, 100
	tests := []struct {
		name     string
		opts     []producer.Opt
		min, max int64
	}{
		{"no trimming", nil, records, records},
		{"approximate", []producer.Opt{producer.WithMaxLen(maxLen)}, maxLen, 3 * maxLen},
		{"exact", []producer.Opt{producer.WithMaxLen(maxLen), producer.WithApproxTrim(false)}, maxLen, maxLen},
	}
	for _, b := range backends {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t, b.client(t), 1)
				p := f.producer(t, tc.opts...)
				batch := make([]producer.Record, records)
				for i := range batch {
					batch[i] = producer.Record{PartitionKey: "k", Fields: []any{"seq", i}}
				}
				for i, r := range p.PublishBatch(context.Background(), batch) {
					if r.Err != nil {
						t.Fatalf("record %d: %v", i, r.Err)
					}
				}
				n := f.totalLen(t, 1)
				if n < tc.min || n > tc.max {
					t.Fatalf("XLEN after %d records = %d, want %d..%d", records, n, tc.min, tc.max)
				}
			})
		}
	}
}
