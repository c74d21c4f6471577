package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/rscoord/rscoord/persistence"
)

// ErrNotReady wraps every reason [Coordinator.Ready] gives.
var ErrNotReady = errors.New("coordinator not ready")

// Ready reports whether this coordinator can serve heartbeats now: it is
// not shutting down and its store answers a read (a store that failed a
// write fails it too). Redis is not asked: heartbeats never wait on it,
// and a replica taken out of service because Redis is slow would stop
// consumption that does not need Redis; Health reports Redis instead. It
// is the readiness probe's check (docs/protocol.md §5.1); the error says
// why not, for logs, never for the probe's answer.
func (c *Coordinator) Ready(ctx context.Context) error {
	if c.Terminating() {
		return fmt.Errorf("%w: shutting down", ErrNotReady)
	}
	// Any read goes through the store's open/failed checks; the newest
	// audit entry is the cheapest one that exists in every store.
	if _, err := c.env.store.ListAudit(ctx, persistence.AuditQuery{Limit: 1}); err != nil {
		return fmt.Errorf("%w: store: %w", ErrNotReady, err)
	}
	return nil
}
