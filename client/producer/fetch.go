package producer

import (
	"context"
	"fmt"
	"time"
)

// maxRoutingBytes bounds a routing answer: 100 000 shards at ~70 bytes each
// stay far below it.
const maxRoutingBytes = 32 << 20

// fetchRouting asks the coordinator for the routing, bounded by the fetch
// timeout. A non-2xx answer is a *CoordinatorError.
func (p *Producer) fetchRouting(ctx context.Context) (*routing, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.fetchTimeout)
	defer cancel()
	sent := time.Now()
	body, err := p.client.ProducerRouting(ctx, p.cfg.prefix, p.cfg.group)
	if err != nil {
		return nil, fmt.Errorf("fetch routing: %w", err)
	}
	r, err := newRouting(p.cfg.prefix, body, sent)
	if err != nil {
		return nil, fmt.Errorf("fetch routing: %w", err)
	}
	return r, nil
}
