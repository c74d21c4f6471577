package actors

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/reshard"
)

// Autoscale answers a stream's autoscaling policy (mode off when never
// set) and its last decision.
func (c *Coordinator) Autoscale(ctx context.Context, prefix string) (protocol.AutoscaleResponse, error) {
	pid, err := c.streamPID(prefix)
	if err != nil {
		return protocol.AutoscaleResponse{}, err
	}
	return askReply[protocol.AutoscaleResponse](ctx, c, pid, &getAutoscaleMsg{})
}

// SetAutoscale replaces a stream's autoscaling policy; it is saved with
// the stream record before it is answered.
func (c *Coordinator) SetAutoscale(ctx context.Context, prefix string, req protocol.AutoscaleRequest) (protocol.AutoscaleResponse, error) {
	if err := c.mutating(); err != nil {
		return protocol.AutoscaleResponse{}, err
	}
	pid, err := c.streamPID(prefix)
	if err != nil {
		return protocol.AutoscaleResponse{}, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return protocol.AutoscaleResponse{}, err
	}
	p, err := policyOf(req, c.env.cfg.MaxShards)
	if err != nil {
		return protocol.AutoscaleResponse{}, err
	}
	if p.Mode != reshard.AutoscaleOff && c.env.cfg.Redis == nil {
		return protocol.AutoscaleResponse{}, protocol.Errorf(protocol.CodeInvalidRequest,
			"autoscaling reads the shards' load in Redis, and this coordinator runs without --redis: only mode off is accepted")
	}
	return askReply[protocol.AutoscaleResponse](ctx, c, pid, &setAutoscaleMsg{policy: p, by: req.RequestedBy})
}

// policyOf is the policy req asks for, its defaults filled in and checked
// against limit (--max-shards). A field given must be positive: leaving it
// out is how a bound is unset.
func policyOf(req protocol.AutoscaleRequest, limit int) (reshard.AutoscalePolicy, error) {
	var why []string
	if req.Mode == "" {
		why = append(why, "mode is required: on, dry-run or off")
	}
	positiveInt := func(name string, v *int64) int64 {
		if v == nil {
			return 0
		}
		if *v <= 0 {
			why = append(why, fmt.Sprintf("%s %d must be positive; leave it out for none", name, *v))
		}
		return *v
	}
	positiveFloat := func(name string, v *float64) float64 {
		if v == nil {
			return 0
		}
		if !(*v > 0) {
			why = append(why, fmt.Sprintf("%s %v must be positive; leave it out for the default", name, *v))
		}
		return *v
	}
	count := func(name string, v *int) int {
		if v == nil {
			return 0
		}
		if *v < 1 {
			why = append(why, fmt.Sprintf("%s %d must be at least 1", name, *v))
		}
		return *v
	}
	p := reshard.AutoscalePolicy{
		Mode:                     reshard.AutoscaleMode(req.Mode),
		MaxShardLength:           positiveInt("maxShardLength", req.MaxShardLength),
		MaxShardMemoryBytes:      positiveInt("maxShardMemoryBytes", req.MaxShardMemoryBytes),
		MaxShardAppendsPerSecond: positiveFloat("maxShardAppendsPerSecond", req.MaxShardAppendsPerSecond),
		LowWatermark:             positiveFloat("lowWatermark", req.LowWatermark),
		MinShards:                count("minShards", req.MinShards),
		MaxShards:                count("maxShards", req.MaxShards),
	}
	if v := req.CooldownSeconds; v != nil {
		if *v < 1 || *v > int64(reshard.MaxCooldown/time.Second) {
			why = append(why, fmt.Sprintf("cooldownSeconds %d must be between 1 and %d", *v, int64(reshard.MaxCooldown/time.Second)))
		} else {
			p.Cooldown = time.Duration(*v) * time.Second
		}
	}
	if len(why) > 0 {
		return p, protocol.Errorf(protocol.CodeInvalidRequest, "autoscale policy: "+strings.Join(why, "; "))
	}
	p = p.WithDefaults(limit)
	return p, reshard.ValidateAutoscale(p, limit)
}
