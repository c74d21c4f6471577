package producerit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/producer"
)

func TestRoutingLeaseExpires(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f := newFixture(t, b.client(t), 4)
			p := f.producer(t, producer.WithRefreshInterval(100*time.Millisecond), producer.WithRoutingLease(300*time.Millisecond))
			ctx := context.Background()
			// Refreshes keep the lease alive past its length.
			time.Sleep(500 * time.Millisecond)
			if _, _, err := p.Publish(ctx, "k", []any{"f", "v"}); err != nil {
				t.Fatalf("Publish with a live coordinator: %v", err)
			}
			before := f.totalLen(t, 4)

			f.coord.Stop()
			time.Sleep(500 * time.Millisecond)
			_, _, err := p.Publish(ctx, "k", []any{"f", "v"})
			if !errors.Is(err, producer.ErrRoutingLeaseExpired) {
				t.Fatalf("Publish after the lease = %v, want ErrRoutingLeaseExpired", err)
			}
			t.Logf("error: %v", err)
			res := p.PublishBatch(ctx, []producer.Record{{PartitionKey: "a", Fields: []any{"f", "v"}}, {PartitionKey: "b", Fields: []any{"f", "v"}}})
			for i, r := range res {
				if !errors.Is(r.Err, producer.ErrRoutingLeaseExpired) || r.ID != "" {
					t.Fatalf("batch record %d = %+v, want ErrRoutingLeaseExpired", i, r)
				}
			}
			if _, _, err := p.Route("k"); !errors.Is(err, producer.ErrRoutingLeaseExpired) {
				t.Fatalf("Route after the lease = %v, want ErrRoutingLeaseExpired", err)
			}
			if after := f.totalLen(t, 4); after != before {
				t.Fatalf("XLEN %d → %d: records published on an expired lease", before, after)
			}
		})
	}
}
