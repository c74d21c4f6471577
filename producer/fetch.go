package producer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rscoord/rscoord/protocol"
)

// maxRoutingBytes bounds a routing answer: 100 000 shards at ~70 bytes each
// stay far below it.
const maxRoutingBytes = 32 << 20

// routingPath is the producer-routing endpoint of prefix and group.
func routingPath(prefix, group string) string {
	return protocol.BasePath + "/streams/" + url.PathEscape(prefix) + "/groups/" + url.PathEscape(group) + "/producer-routing"
}

// fetchRouting asks the coordinator for the routing, bounded by the fetch
// timeout. A non-2xx answer is a *CoordinatorError.
func (p *Producer) fetchRouting(ctx context.Context) (*routing, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.fetchTimeout)
	defer cancel()
	u := p.cfg.coordinator + routingPath(p.cfg.prefix, p.cfg.group)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch routing: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if p.cfg.authorization != "" {
		req.Header.Set("Authorization", p.cfg.authorization)
	}
	sent := time.Now()
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch routing: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRoutingBytes))
	if err != nil {
		return nil, fmt.Errorf("fetch routing: read answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("fetch routing: %w", decodeError(resp, raw))
	}
	var body protocol.ProducerRoutingResponse
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("fetch routing: decode answer: %w", err)
	}
	r, err := newRouting(p.cfg.prefix, body, sent)
	if err != nil {
		return nil, fmt.Errorf("fetch routing: %w", err)
	}
	return r, nil
}

// decodeError turns a non-2xx answer into a *CoordinatorError, keeping the
// start of a body that is not a §3 error body (a proxy's page, say).
func decodeError(resp *http.Response, raw []byte) *CoordinatorError {
	e := &CoordinatorError{StatusCode: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(raw, &e.Body); err != nil || e.Body.ErrorCode == "" {
		msg := strings.Join(strings.Fields(string(raw)), " ")
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		e.Body = protocol.ErrorBody{Message: msg}
	}
	return e
}
