package producer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
)

// maxRoutingBytes bounds a routing answer: 100 000 shards at ~70 bytes each
// stay far below it.
const maxRoutingBytes = 32 << 20

// errBadRouting marks a routing answer that does not hold together: the
// coordinator answered, so waiting for it does not help.
var errBadRouting = errors.New("bad routing answer")

// Backoff bounds of Start's wait for the coordinator (WithStartWait).
const (
	startBackoffMin = 100 * time.Millisecond
	startBackoffMax = 2 * time.Second
)

// startRouting fetches the first routing; with WithStartWait it retries
// what may heal until it succeeds or ctx ends.
func (p *Producer) startRouting(ctx context.Context) (*routing, error) {
	backoff := time.Duration(0)
	for failures := 1; ; failures++ {
		r, err := p.fetchRouting(ctx)
		if err == nil || !p.cfg.startWait || !mayHeal(err) {
			return r, err
		}
		if failures == 1 || failures%10 == 0 {
			p.log.Warn("coordinator not available; start waits for it", "failures", failures, "err", err)
		}
		backoff = min(max(backoff*2, startBackoffMin), startBackoffMax)
		t := time.NewTimer(backoff + rand.N(backoff/10+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waited for the coordinator until the context ended (%w); last error: %w", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// mayHeal reports whether a failed routing fetch may succeed unchanged
// later: no answer at all (the coordinator down or unreachable, a
// timeout), or an answer that says so (429, 503, a 5xx without an error
// body). A 4xx answer is final.
func mayHeal(err error) bool {
	var ce *coordclient.Error
	if errors.As(err, &ce) {
		return ce.Temporary()
	}
	return !errors.Is(err, errBadRouting)
}

// fetchRouting asks the coordinator for the routing, bounded by the fetch
// timeout. A non-2xx answer is a *CoordinatorError.
func (p *Producer) fetchRouting(ctx context.Context) (*routing, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.fetchTimeout)
	defer cancel()
	sent := time.Now()
	body, err := p.client.ProducerRouting(ctx, p.cfg.prefix, p.cfg.group)
	if errors.Is(err, coordclient.ErrForbidden) {
		// A coordinator that scopes credentials to streams answers 403
		// both for a stream the caller may not see and for one that does
		// not exist, so that the answer does not tell who may see what.
		return nil, fmt.Errorf("fetch routing: the credentials may not read the routing of stream %q group %q, or that stream "+
			"or group does not exist (a 403 does not tell which: check the name and the credentials' role): %w",
			p.cfg.prefix, p.cfg.group, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch routing: %w", err)
	}
	r, err := newRouting(p.cfg.prefix, body, sent)
	if err != nil {
		return nil, fmt.Errorf("fetch routing: %w: %w", errBadRouting, err)
	}
	return r, nil
}
