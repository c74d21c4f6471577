package producerit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

func TestRoutingLeaseExpires(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			f := newFixture(t, b.client(t), 4)
			p := f.producer(t, producer.WithRefreshInterval(100*time.Millisecond), producer.WithRoutingLease(300*time.Millisecond))
			ctx := context.Background()
			// Refreshes keep the lease alive past its length, all along.
			var err error
			if !poll.Stays(500*time.Millisecond, 20*time.Millisecond, func() bool { _, _, err = p.Route("k"); return err == nil }) {
				t.Fatalf("Route with a live coordinator: %v", err)
			}
			if _, _, err := p.Publish(ctx, "k", []any{"f", "v"}); err != nil {
				t.Fatalf("Publish with a live coordinator: %v", err)
			}
			before := f.totalLen(t, 4)

			f.coord.Stop()
			awaitLeaseExpired(t, p, 300*time.Millisecond)
			_, _, err = p.Publish(ctx, "k", []any{"f", "v"})
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

// TestCoordinatorRoutingLeaseBoundsTheProducers: the coordinator says in
// every routing answer how long routing may be used (its
// --producer-routing-lease: no removed shard retires sooner after a
// scale-in activated), and a producer whose own lease is longer uses the
// coordinator's: past it a publish refreshes the routing first, and with
// the coordinator gone it stops publishing rather than write to a shard
// that may have retired.
func TestCoordinatorRoutingLeaseBoundsTheProducers(t *testing.T) {
	rdb := standaloneClient(t)
	f := &fixture{
		coord:  coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, ProducerRoutingLease: 400 * time.Millisecond}),
		rdb:    rdb,
		prefix: prefixFor(t),
	}
	f.coord.CreateStream(f.prefix, 2)
	if err := redistest.CreateShards(context.Background(), rdb, f.prefix, 2, f.prefix); err != nil {
		t.Fatal(err)
	}
	var routing protocol.ProducerRoutingResponse
	f.coord.JSON(http.MethodGet, "/coord/v1/streams/"+f.prefix+"/groups/"+f.prefix+"/producer-routing", nil, http.StatusOK, &routing)
	if routing.RoutingLeaseMs != 400 {
		t.Fatalf("routingLeaseMs %d, want the coordinator's 400", routing.RoutingLeaseMs)
	}
	// Refreshed in the background far less often than the coordinator's
	// lease: a publish after that lease refreshes first.
	p := f.producer(t, producer.WithRefreshInterval(30*time.Second), producer.WithRoutingLease(time.Minute))
	ctx := context.Background()
	if _, _, err := p.Publish(ctx, "k", []any{"f", "v"}); err != nil {
		t.Fatalf("Publish with a live coordinator: %v", err)
	}
	before, _ := p.Routing()
	poll.Hold(t.Context(), 600*time.Millisecond) // past the coordinator's lease
	if _, _, err := p.Publish(ctx, "k", []any{"f", "v"}); err != nil {
		t.Fatalf("Publish past the coordinator's lease, the coordinator up: %v", err)
	}
	if after, _ := p.Routing(); !after.FetchedAt.After(before.FetchedAt) {
		t.Fatalf("routing fetched at %v, then %v: not refreshed before the publish", before.FetchedAt, after.FetchedAt)
	}
	f.coord.Stop()
	poll.Hold(t.Context(), 600*time.Millisecond) // past the coordinator's lease
	if _, _, err := p.Publish(ctx, "k", []any{"f", "v"}); !errors.Is(err, producer.ErrRoutingLeaseExpired) {
		t.Fatalf("Publish 600ms after the last refresh, the coordinator's lease 400ms and its own a minute: %v, want ErrRoutingLeaseExpired", err)
	}
}
