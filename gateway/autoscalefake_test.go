package gateway_test

import (
	"context"

	"github.com/rscoord/rscoord/client/protocol"
)

// The fake serves the autoscale routes: a policy never set, and a PUT
// answered as saved.

func (f *fakeBackend) Autoscale(_ context.Context, prefix string) (protocol.AutoscaleResponse, error) {
	if err := f.known(prefix, ""); err != nil {
		return protocol.AutoscaleResponse{}, err
	}
	return protocol.AutoscaleResponse{Stream: prefix, Policy: protocol.AutoscalePolicy{Mode: protocol.AutoscaleOff,
		LowWatermark: 0.5, MinShards: 1, MaxShards: protocol.MaxShardCount, CooldownSeconds: 300}}, nil
}

func (f *fakeBackend) SetAutoscale(ctx context.Context, prefix string, req protocol.AutoscaleRequest) (protocol.AutoscaleResponse, error) {
	resp, err := f.Autoscale(ctx, prefix)
	resp.Policy.Mode, resp.Policy.RequestedBy = req.Mode, req.RequestedBy
	return resp, err
}
