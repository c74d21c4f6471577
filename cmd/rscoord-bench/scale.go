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

// ScaleCmd runs bench.RunScale on a coordinator in this process.
type ScaleCmd struct {
	Members  int  `default:"10000" help:"Members in all, spread evenly over the groups."`
	Groups   int  `default:"1000" help:"Streams (each with its default group)."`
	Shards   int  `default:"10" help:"Shards per stream."`
	Conns    int  `default:"32" help:"Concurrent clients."`
	Restarts int  `default:"3" help:"Restarts of the coordinator to time."`
	JSON     bool `name:"json" help:"Print the report as JSON."`
}

// Run runs the scale bench and prints its report.
func (s *ScaleCmd) Run(ctx context.Context, out io.Writer) error {
	co, err := startCoordinator(ctx, assign.Config{})
	if err != nil {
		return err
	}
	defer co.stop(ctx)
	rep, err := bench.RunScale(ctx, bench.ScaleConfig{
		Server: co.url, Groups: s.Groups, Members: s.Members, Shards: s.Shards, Conns: s.Conns, Restarts: s.Restarts,
		Stop: co.shutdown,
		Start: func(ctx context.Context) (string, error) {
			if err := co.start(ctx); err != nil {
				return "", err
			}
			return co.url, nil
		},
	})
	if err != nil {
		return fmt.Errorf("scale bench: %w", err)
	}
	if s.JSON {
		return printJSON(out, rep)
	}
	fmt.Fprintf(out, "scale: %d members in %d groups (%d each), %d shards per stream\n",
		rep.Members, s.Groups, s.Members/s.Groups, s.Shards)
	fmt.Fprintf(out, "  join and settle took %v\n", rep.Join.Round(time.Millisecond))
	fmt.Fprintf(out, "  live heap after GC: groups alone %.1f MiB, with members %.1f MiB\n",
		float64(rep.HeapGroups)/(1<<20), float64(rep.HeapMembers)/(1<<20))
	fmt.Fprintf(out, "  per idle member %.0f B  target ≤ %d B: %s\n", rep.PerMember, targetPerMember,
		verdict(rep.PerMember <= targetPerMember))
	if len(rep.Restarts) == 0 {
		return nil
	}
	var served []time.Duration
	for i, r := range rep.Restarts {
		fmt.Fprintf(out, "  restart %d: stop %v, start %v, every group served after %v\n", i+1,
			r.Stop.Round(time.Millisecond), r.Start.Round(time.Millisecond), r.Served.Round(time.Millisecond))
		served = append(served, r.Served)
	}
	worst := slices.Max(served)
	fmt.Fprintf(out, "  restart of %d groups: median %v, max %v  target ≤ %v: %s\n", s.Groups,
		slices.Sorted(slices.Values(served))[len(served)/2].Round(time.Millisecond), worst.Round(time.Millisecond),
		targetRestart, verdict(worst <= targetRestart))
	return nil
}
