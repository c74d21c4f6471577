package producer

import (
	"context"
	"fmt"
	"time"
)

// refreshLoop refreshes the routing every refresh interval, and at once when
// kicked, until ctx ends. A failed refresh is logged and retried at the next
// tick; the routing lease decides when publishing stops.
func (p *Producer) refreshLoop(ctx context.Context) {
	defer close(p.done)
	t := time.NewTimer(p.cfg.refreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		cur := p.cur.Load()
		if _, err := p.refresh(ctx, cur.gen); err != nil && ctx.Err() == nil {
			latest := p.cur.Load()
			p.log.Warn("routing refresh failed",
				"err", err,
				"routingAge", time.Since(latest.fetchedAt).Round(time.Millisecond),
				"routingLease", latest.lease(p.cfg.routingLease))
		}
		t.Reset(p.cfg.refreshInterval)
	}
}

// ObserveMetadataVersion tells the producer that the group's metadataVersion
// has reached v (seen in a heartbeat answer, say). If v is newer than the
// routing's, the refresher fetches the routing at once instead of at its
// next tick. It never blocks.
func (p *Producer) ObserveMetadataVersion(v int64) {
	cur := p.cur.Load()
	if cur == nil || v <= cur.metadataVersion {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default: // a refresh is already due
	}
}

// refresh fetches and stores the routing unless a snapshot newer than
// afterGen is already in place (another caller refreshed meanwhile), and
// returns the snapshot in use afterwards. Only one fetch runs at a time.
func (p *Producer) refresh(ctx context.Context, afterGen uint64) (*routing, error) {
	select {
	case p.fetching <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("refresh routing: %w", ctx.Err())
	}
	defer func() { <-p.fetching }()
	old := p.cur.Load()
	if old.gen > afterGen {
		return old, nil
	}
	r, err := p.fetchRouting(ctx)
	if err != nil {
		p.setLastRefreshError(err)
		return nil, err
	}
	if r.metadataVersion < old.metadataVersion {
		// An older answer (a lagging coordinator behind a load balancer,
		// say) must not roll routing back, nor renew its lease.
		err := fmt.Errorf("refresh routing: answer has metadataVersion %d, older than the %d in use; ignored", r.metadataVersion, old.metadataVersion)
		p.setLastRefreshError(err)
		return nil, err
	}
	r.gen = old.gen + 1
	p.cur.Store(r)
	p.setLastRefreshError(nil)
	if r.serverLease > 0 && r.serverLease <= p.cfg.refreshInterval && p.leaseWarned.CompareAndSwap(false, true) {
		p.log.Warn("the coordinator's routing lease is not longer than the refresh interval: publishes fail between refreshes",
			"coordinatorRoutingLease", r.serverLease, "refreshInterval", p.cfg.refreshInterval)
	}
	if len(r.keys) != len(old.keys) || r.metadataVersion != old.metadataVersion {
		p.log.Info("routing changed",
			"shardCount", len(r.keys), "previousShardCount", len(old.keys),
			"metadataVersion", r.metadataVersion, "previousMetadataVersion", old.metadataVersion)
	}
	return r, nil
}

func (p *Producer) setLastRefreshError(err error) {
	p.errMu.Lock()
	p.lastErr = err
	p.errMu.Unlock()
}

// lastRefreshError is the last failed refresh since the last success, or nil.
func (p *Producer) lastRefreshError() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.lastErr
}
