package producerit_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/producer"
)

// TestRoutingLeaseErrorWrapsTheRefreshError: the error of a publish refused
// on an expired routing lease carries the last refresh failure as a cause,
// so that a caller tells a coordinator that is down (connection refused)
// from one that answers an error, with errors.Is and errors.As.
func TestRoutingLeaseErrorWrapsTheRefreshError(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 2)
	p := f.producer(t, producer.WithRefreshInterval(100*time.Millisecond), producer.WithRoutingLease(300*time.Millisecond))
	f.coord.Stop()
	time.Sleep(500 * time.Millisecond)
	_, _, err := p.Publish(context.Background(), "k", []any{"f", "v"})
	if !errors.Is(err, producer.ErrRoutingLeaseExpired) {
		t.Fatalf("Publish after the lease = %v, want ErrRoutingLeaseExpired", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Publish after the lease, the coordinator stopped: %v; want it to wrap the refresh's ECONNREFUSED", err)
	}
	if _, _, err := p.Route("k"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Route after the lease, the coordinator stopped: %v; want it to wrap the refresh's ECONNREFUSED", err)
	}
}
