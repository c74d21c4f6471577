package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/rscoord/rscoord/persistence"
)

// ErrNotReady wraps every reason [Coordinator.Ready] gives.
var ErrNotReady = errors.New("coordinator not ready")

// Ready reports whether this coordinator can serve requests now: it is not
// shutting down, its store answers a read, and Redis answers a ping when
// one is configured. It is the readiness probe's check (docs/protocol.md
// §5.1); the error says why not, for logs, never for the probe's answer.
func (c *Coordinator) Ready(ctx context.Context) error {
	if c.Terminating() {
		return fmt.Errorf("%w: shutting down", ErrNotReady)
	}
	// Any read goes through the store's open/failed checks; the newest
	// audit entry is the cheapest one that exists in every store.
	if _, err := c.env.store.ListAudit(ctx, persistence.AuditQuery{Limit: 1}); err != nil {
		return fmt.Errorf("%w: store: %w", ErrNotReady, err)
	}
	if r := c.env.cfg.Redis; r != nil {
		pctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
		defer cancel()
		if err := r.Ping(pctx); err != nil {
			return fmt.Errorf("%w: redis: %w", ErrNotReady, err)
		}
	}
	return nil
}
