package producerit_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestRoutingLeaseErrorWrapsTheRefreshError: the error of a publish refused
// on an expired routing lease carries the last refresh failure as a cause,
// so that a caller tells a coordinator that is down (connection refused)
// from one that answers an error, with errors.Is and errors.As.
func TestRoutingLeaseErrorWrapsTheRefreshError(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 2)
	p := f.producer(t, producer.WithRefreshInterval(100*time.Millisecond), producer.WithRoutingLease(300*time.Millisecond))
	f.coord.Stop()
	awaitLeaseExpired(t, p, 300*time.Millisecond)
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

// awaitLeaseExpired waits until p's routing lease (lease long) has
// expired, its coordinator stopped: Route, which publishes nothing, says
// so. A lease still good at three times its length fails t.
func awaitLeaseExpired(t *testing.T, p *producer.Producer, lease time.Duration) {
	t.Helper()
	var err error
	if !poll.Wait(3*lease, 10*time.Millisecond, func() bool {
		_, _, err = p.Route("k")
		return errors.Is(err, producer.ErrRoutingLeaseExpired)
	}) {
		t.Fatalf("Route %v after the coordinator stopped, its lease %v: %v, want ErrRoutingLeaseExpired", 3*lease, lease, err)
	}
}
