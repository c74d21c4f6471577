package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/bench"
)

// ConvergeCmd runs bench.RunConverge.
type ConvergeCmd struct {
	Server    string        `help:"Coordinator base URL; empty starts one in this process."`
	Creds     Credentials   `embed:""`
	Prefix    string        `default:"converge" help:"Stream (and default group) the run creates; it must not exist."`
	Members   int           `default:"10" help:"Members of the settled group."`
	Shards    int           `default:"900" help:"Shards of the stream."`
	Join      int           `default:"0" help:"Members that join per round."`
	Leave     int           `default:"0" help:"Members that leave per round (after the join converged)."`
	Rounds    int           `default:"3" help:"Rounds of changes."`
	Drain     time.Duration `default:"0" help:"Simulated drain of a revoked shard before it is reported REVOKED (the member runtime's read loop takes up to its BLOCK, 1s by default)."`
	Seed      uint64        `default:"1" help:"Seed of the members' phases and of the pauses between changes."`
	Heartbeat time.Duration `name:"heartbeat-interval" default:"0" help:"Steady heartbeat interval of the in-process coordinator (0: protocol default 3s)."`
	Reconcile time.Duration `name:"reconcile-interval" default:"0" help:"Reconcile heartbeat interval of the in-process coordinator (0: protocol default 200ms)."`
	NoWait    bool          `name:"no-wait" help:"Members heartbeat like the reference clients, without waitMs: they hear of a change only at their next heartbeat."`
	JSON      bool          `name:"json" help:"Print the report as JSON."`
}

// Run runs the changes and prints each convergence time.
func (c *ConvergeCmd) Run(ctx context.Context, out io.Writer) error {
	if c.Join <= 0 && c.Leave <= 0 {
		c.Join = 1
	}
	creds, err := c.Creds.wire()
	if err != nil {
		return err
	}
	server := c.Server
	if server == "" {
		co, err := startCoordinator(ctx, assign.Config{HeartbeatInterval: c.Heartbeat, ReconcileInterval: c.Reconcile})
		if err != nil {
			return err
		}
		defer co.stop(ctx)
		server = co.url
	}
	rep, err := bench.RunConverge(ctx, bench.ConvergeConfig{Server: server, Credentials: creds, Prefix: c.Prefix, Members: c.Members, Shards: c.Shards,
		Join: c.Join, Leave: c.Leave, Rounds: c.Rounds, Drain: c.Drain, Seed: c.Seed, NoWait: c.NoWait})
	if err != nil {
		return fmt.Errorf("converge bench: %w", err)
	}
	if c.JSON {
		return printJSON(out, rep)
	}
	fmt.Fprintf(out, "converge: %d members, %d shards, join %d / leave %d per round, %d rounds, drain %v, seed %d, held heartbeats %v\n",
		c.Members, c.Shards, c.Join, c.Leave, c.Rounds, c.Drain, c.Seed, !c.NoWait)
	fmt.Fprintf(out, "  steady heartbeat interval answered: %v\n", rep.Interval)
	fmt.Fprintln(out, "  converged = every member reported its whole target, OK, nothing pending")
	fmt.Fprintln(out, "  held      = every member was granted its whole target, nothing pending or draining (not yet reported)")
	for _, k := range []struct {
		name  string
		times []time.Duration
	}{{"join", rep.Joins}, {"leave", rep.Leaves}, {"join held", rep.JoinsHeld}, {"leave held", rep.LeavesHeld}} {
		if len(k.times) == 0 {
			continue
		}
		for i := range k.times {
			k.times[i] = k.times[i].Round(time.Millisecond)
		}
		sorted := slices.Sorted(slices.Values(k.times))
		worst := sorted[len(sorted)-1]
		fmt.Fprintf(out, "  %-10s rounds %v  median %v  max %v (%.2f intervals)  target ≤ %v: %s\n", k.name, k.times,
			sorted[len(sorted)/2], worst, float64(worst)/float64(rep.Interval), targetConverge, verdict(worst <= targetConverge))
	}
	fmt.Fprintf(out, "  heartbeats during changes %d; overlap checks %d, overlaps %d\n", rep.Heartbeats, rep.Checks, rep.Overlaps)
	if rep.Overlaps > 0 {
		return fmt.Errorf("converge bench: %d overlaps, e.g. %v", rep.Overlaps, rep.Examples)
	}
	return nil
}
