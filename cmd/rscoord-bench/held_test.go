package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/bench"
)

// TestHeldPairsSmall runs `rscoord-bench held --against` at a tiny size
// on real rscoord processes: both runs of the pair are measured, and the
// comparison is of those measurements.
func TestHeldPairsSmall(t *testing.T) {
	t.Parallel()
	bin := rscoord(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := HeldCmd{Rscoord: bin, Against: bin, Pairs: 1, Groups: 1, Members: 4, Shards: 8, Conns: 4, PerConn: 100,
		Duration: 500 * time.Millisecond, Churn: 4, ChurnLife: 500 * time.Millisecond, Interval: 500 * time.Millisecond, JSON: true}
	var out bytes.Buffer
	if err := cmd.Run(ctx, &out); err != nil {
		t.Fatalf("held --against: %v\n%s", err, out.String())
	}
	var rep struct {
		Pairs      []bench.HeldPair     `json:"pairs"`
		Comparison bench.HeldComparison `json:"comparison"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", out.String(), err)
	}
	if len(rep.Pairs) != 1 {
		t.Fatalf("%d pairs reported, want 1", len(rep.Pairs))
	}
	p := rep.Pairs[0]
	for name, r := range map[string]bench.HeldReport{"run": p.Run, "baseline": p.Baseline} {
		if r.Members != 4 || r.HeldCount == 0 || r.NotHeldCount == 0 || r.NotHeld.P99 <= 0 || r.CPU.Server <= 0 || r.ServerAtOnce == nil || r.Errors != 0 {
			t.Errorf("%s not measured: members %d, held %d, not held %d (p99 %v), server CPU %v, server timing %v, errors %d",
				name, r.Members, r.HeldCount, r.NotHeldCount, r.NotHeld.P99, r.CPU.Server, r.ServerAtOnce, r.Errors)
		}
	}
	want := float64(p.Run.NotHeld.P99) / float64(p.Baseline.NotHeld.P99)
	if c := rep.Comparison; c.Pairs != 1 || len(c.P99Ratios) != 1 || c.P99Ratios[0] != want || c.MedianP99Ratio != want || len(c.ServerWithin10ms) != 1 {
		t.Errorf("comparison %+v, want one pair of ratio %v with the server's timing", c, want)
	}
}

// Pairs start both servers themselves and take more than one run.
func TestHeldPairsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  HeldCmd
		want string
	}{
		{"a running server", HeldCmd{Against: "rscoord", Pairs: 1, Server: "http://127.0.0.1:1"}, "not with --server"},
		{"a profile", HeldCmd{Against: "rscoord", Pairs: 1, Profile: "dir"}, "take one run"},
		{"no pairs", HeldCmd{Against: "rscoord", Pairs: 0}, "--pairs 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cmd.Groups, tc.cmd.Members, tc.cmd.Shards, tc.cmd.Conns = 1, 1, 1, 1
			tc.cmd.Duration, tc.cmd.Churn, tc.cmd.Interval = time.Second, 1, time.Second
			err := tc.cmd.Run(context.Background(), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
