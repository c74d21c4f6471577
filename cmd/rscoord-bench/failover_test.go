package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/internal/proctest"
)

// builder builds the rscoord binary the benches run, once for every test
// (each bench run would build it again into a directory of its own). Set
// by TestMain before any test runs, only read after.
var builder *proctest.Builder

func TestMain(m *testing.M) {
	b, err := proctest.NewBuilder()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builder = b
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { b.Close(); os.Exit(code) }))
}

// rscoord is the rscoord binary, built once.
func rscoord(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	bin, err := builder.Build(ctx, "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestFailoverBenchSmall runs `rscoord-bench failover` at a small size on
// a real 3-member etcd and real rscoord processes, so that the bench keeps
// working: every figure it reports must be a measurement (positive
// throughput through each target, one failover per trial under a bound
// far above the goal, so that a loaded machine does not fail it).
func TestFailoverBenchSmall(t *testing.T) {
	t.Parallel()
	bin := rscoord(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Throughput phases of half a second: enough to measure something,
	// which is all this test asks of them.
	cmd := FailoverCmd{Rscoord: bin, Trials: 2, Members: 20, Shards: 20, Conns: 4, Duration: 500 * time.Millisecond, Rounds: 1, JSON: true}
	var out bytes.Buffer
	err := cmd.Run(ctx, &out)
	if err != nil {
		t.Fatalf("failover bench: %v\n%s", err, out.String())
	}
	var rep FailoverReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", out.String(), err)
	}
	if rep.Single <= 0 || rep.Owner <= 0 || rep.Forwarded <= 0 || rep.EveryURL <= 0 || rep.OwnerRatio <= 0 || rep.ForwardedRatio <= 0 || rep.EveryURLRatio <= 0 {
		t.Errorf("throughput not measured: %+v", rep)
	}
	// Every client given every URL followed the owner hint to the owner.
	if rep.EveryURLClients != cmd.Conns || rep.EveryURLAtOwner != rep.EveryURLClients {
		t.Errorf("%d of %d clients given every URL call the owner at the end, want all %d", rep.EveryURLAtOwner, rep.EveryURLClients, cmd.Conns)
	}
	if len(rep.Rounds) != cmd.Rounds {
		t.Errorf("%d rounds reported, want %d", len(rep.Rounds), cmd.Rounds)
	}
	if len(rep.Failovers) != cmd.Trials {
		t.Fatalf("%d failovers reported, want %d", len(rep.Failovers), cmd.Trials)
	}
	for i, d := range rep.Failovers {
		if d <= 0 || d > 30*time.Second {
			t.Errorf("failover %d took %v", i+1, d)
		}
	}
	if rep.Median <= 0 || rep.Max < rep.Median {
		t.Errorf("median %v, max %v", rep.Median, rep.Max)
	}
	t.Logf("forwarded %.2f×, owner %.2f×, every URL %.2f× of single-node Pebble; failovers %v", rep.ForwardedRatio, rep.OwnerRatio, rep.EveryURLRatio, rep.Failovers)
}
