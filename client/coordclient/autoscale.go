package coordclient

import (
	"context"
	"net/http"

	"github.com/rscoord/rscoord/client/protocol"
)

// StreamAutoscalePath is /streams/{prefix}/autoscale: GET reads the
// stream's autoscaling policy and last decision, PUT sets the policy.
func StreamAutoscalePath(prefix string) string { return Path("streams", prefix, "autoscale") }

// Autoscale reads a stream's autoscaling policy and its last decision.
func (c *Client) Autoscale(ctx context.Context, prefix string) (protocol.AutoscaleResponse, error) {
	var resp protocol.AutoscaleResponse
	_, err := c.Do(ctx, http.MethodGet, StreamAutoscalePath(prefix), nil, &resp)
	return resp, err
}

// SetAutoscale sets a stream's autoscaling policy (ADMIN).
func (c *Client) SetAutoscale(ctx context.Context, prefix string, req protocol.AutoscaleRequest) (protocol.AutoscaleResponse, error) {
	var resp protocol.AutoscaleResponse
	_, err := c.Do(ctx, http.MethodPut, StreamAutoscalePath(prefix), req, &resp)
	return resp, err
}
