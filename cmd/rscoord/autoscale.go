package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// StreamAutoscaleCmd is "rscoord stream autoscale": without --mode it
// shows the policy and its last decision, with --mode it sets the policy.
type StreamAutoscaleCmd struct {
	Prefix                   string         `arg:"" help:"Stream prefix."`
	Mode                     string         `enum:",on,dry-run,off" default:"" help:"on scales, dry-run only reports what it would do, off decides nothing. Without it the policy is shown, not changed."`
	MaxShardLength           *int64         `placeholder:"N" help:"Bound of each shard's length (records not yet acknowledged and deleted)."`
	MaxShardMemoryBytes      *int64         `placeholder:"BYTES" help:"Bound of each shard key's MEMORY USAGE."`
	MaxShardAppendsPerSecond *float64       `placeholder:"N" help:"Bound of each shard's appends per second over one cooldown."`
	LowWatermark             *float64       `placeholder:"F" help:"Fraction of every bound under which every shard stays a whole cooldown before the stream scales in (default 0.5)."`
	MinShards                *int           `placeholder:"N" help:"Fewest shards the policy scales to (default 1)."`
	MaxShards                *int           `placeholder:"N" help:"Most shards the policy scales to (default and at most the server's --max-shards)."`
	Cooldown                 *time.Duration `placeholder:"D" help:"Least time between two changes, and how long a stream stays quiet before it scales in; whole seconds (default 5m)."`
	RequestedBy              string         `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
	Reason                   string         `placeholder:"TEXT" help:"Why, for the audit log."`
}

// Run reads or sets the policy: GET or PUT /streams/{prefix}/autoscale.
func (c *StreamAutoscaleCmd) Run(ctx context.Context, a *Admin) error {
	if err := protocol.ValidateStreamPrefix(c.Prefix); err != nil {
		return fmt.Errorf("stream autoscale: %w", err)
	}
	var (
		resp protocol.AutoscaleResponse
		raw  []byte
		err  error
	)
	if c.Mode == "" {
		if c.MaxShardLength != nil || c.MaxShardMemoryBytes != nil || c.MaxShardAppendsPerSecond != nil || c.LowWatermark != nil ||
			c.MinShards != nil || c.MaxShards != nil || c.Cooldown != nil {
			return fmt.Errorf("stream autoscale: a policy needs --mode (on, dry-run or off)")
		}
		raw, err = a.Client.Do(ctx, http.MethodGet, coordclient.StreamAutoscalePath(c.Prefix), nil, &resp)
	} else {
		req := protocol.AutoscaleRequest{Mode: c.Mode, MaxShardLength: c.MaxShardLength, MaxShardMemoryBytes: c.MaxShardMemoryBytes,
			MaxShardAppendsPerSecond: c.MaxShardAppendsPerSecond, LowWatermark: c.LowWatermark, MinShards: c.MinShards,
			MaxShards: c.MaxShards, RequestedBy: c.RequestedBy, Reason: c.Reason}
		if c.Cooldown != nil {
			if *c.Cooldown < time.Second || *c.Cooldown%time.Second != 0 {
				return fmt.Errorf("stream autoscale: --cooldown %v: must be whole seconds, at least 1s", *c.Cooldown)
			}
			secs := int64(*c.Cooldown / time.Second)
			req.CooldownSeconds = &secs
		}
		raw, err = a.Client.Do(ctx, http.MethodPut, coordclient.StreamAutoscalePath(c.Prefix), req, &resp)
	}
	if err != nil {
		return fmt.Errorf("stream autoscale %s: %w", c.Prefix, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	p := resp.Policy
	bound := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return formatInt(*v)
	}
	t := newTable(a.Out)
	t.row("STREAM", resp.Stream)
	t.row("MODE", p.Mode)
	t.row("MAX SHARD LENGTH", bound(p.MaxShardLength))
	t.row("MAX SHARD MEMORY BYTES", bound(p.MaxShardMemoryBytes))
	rate := "-"
	if p.MaxShardAppendsPerSecond != nil {
		rate = strconv.FormatFloat(*p.MaxShardAppendsPerSecond, 'g', -1, 64)
	}
	t.row("MAX SHARD APPENDS/S", rate)
	t.row("LOW WATERMARK", strconv.FormatFloat(p.LowWatermark, 'g', -1, 64))
	t.row("SHARDS", fmt.Sprintf("%d..%d", p.MinShards, p.MaxShards))
	t.row("COOLDOWN", (time.Duration(p.CooldownSeconds) * time.Second).String())
	if d := resp.LastDecision; d != nil {
		taken := "reported only"
		if d.Taken {
			taken = "taken"
		}
		t.row("LAST DECISION", fmt.Sprintf("%s %d→%d (%s) at %s: %s", d.Action, d.FromShards, d.ToShards, taken, d.At.Format(time.RFC3339), d.Reason))
	} else {
		t.row("LAST DECISION", "-")
	}
	return t.flush()
}
