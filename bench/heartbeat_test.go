package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if os.Getenv(heldLoadChildEnv) == "1" {
		// This binary, started again by a held test, is the process
		// running the held members.
		if err := ServeHeldLoad(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	gin.SetMode(gin.ReleaseMode)
	leakcheck.VerifyTestMain(m)
}

func TestRunHeartbeatAgainstARealCoordinator(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	rep, err := RunHeartbeat(context.Background(), HeartbeatConfig{
		Server: s.URL, Groups: 2, Members: 5, Shards: 12, Duration: 300 * time.Millisecond, Conns: 4,
		WriteStats: s.Store.WriteStats,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The join phase wrote the joins; the steady phases wrote nothing.
	if j := rep.Join; !j.Measured || j.Settle <= 0 || j.Sweeps < 1 || j.Keys == 0 || j.Bytes == 0 || j.KeysPerSecond <= 0 || j.SteadyKeys != 0 {
		t.Fatalf("join report: %+v", j)
	}
	if rep.Requests == 0 || rep.PerSecond <= 0 || rep.Baseline.Requests == 0 || rep.RatioToBase <= 0 {
		t.Fatalf("empty report: %+v", rep)
	}
	if rep.NotOK != 0 || rep.Errors != 0 {
		t.Fatalf("a steady group answered %d non-OK heartbeats and %d errors", rep.NotOK, rep.Errors)
	}
	if len(rep.Rounds) != 1 || rep.Rounds[0].Coordinator.Requests != rep.Requests {
		t.Fatalf("rounds: %+v", rep.Rounds)
	}
	if rep.Latency.P50 <= 0 || rep.Latency.P50 > rep.Latency.P99 || rep.Latency.P99 > rep.Latency.Max {
		t.Fatalf("latencies out of order: %+v", rep.Latency)
	}
}

func TestRunHeartbeatPaced(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	cfg := HeartbeatConfig{
		Server: s.URL, Groups: 2, Members: 10, Shards: 8, Duration: 500 * time.Millisecond, Conns: 4,
		Interval: 100 * time.Millisecond, Rounds: 2,
	}
	rep, err := RunHeartbeat(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 || rep.Offered != 200 {
		t.Fatalf("rounds %d, offered %.0f/s; want 2 and 200/s", len(rep.Rounds), rep.Offered)
	}
	// Paced: exactly members × duration/interval heartbeats per phase,
	// minus the few whose answer came after the phase ended.
	want := 2 * 20 * 5
	for name, got := range map[string]int{"coordinator": rep.Requests, "baseline": rep.Baseline.Requests} {
		if got > want || got < want*8/10 {
			t.Errorf("%s sent %d heartbeats in 2 paced rounds, want about %d", name, got, want)
		}
	}
	if rep.NotOK != 0 || rep.Errors != 0 {
		t.Fatalf("a steady group answered %d non-OK heartbeats and %d errors", rep.NotOK, rep.Errors)
	}
	for _, l := range []Latencies{rep.Latency, rep.Lag, rep.Baseline.Latency} {
		if l.P50 < 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max || l.Max <= 0 {
			t.Fatalf("quantiles out of order: %+v", l)
		}
	}
	if rep.RatioToBase <= 0 || rep.Rounds[0].Ratio <= 0 || rep.Rounds[1].Ratio <= 0 {
		t.Fatalf("ratios missing: %+v", rep)
	}
}

// TestRunHeartbeatPhasesStartSteady: with the order of the phases
// alternating, two phases pass between coordinator phases, longer here than
// the member lease; every phase must still start from a steady group, so
// that no measured heartbeat is answered non-OK and the steady phases
// write nothing.
func TestRunHeartbeatPhasesStartSteady(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Group: assign.Config{
		HeartbeatInterval: 300 * time.Millisecond, ReconcileInterval: 100 * time.Millisecond, MemberLease: 1600 * time.Millisecond,
	}})
	rep, err := RunHeartbeat(context.Background(), HeartbeatConfig{
		Server: s.URL, Groups: 1, Members: 6, Shards: 12, Duration: time.Second, Conns: 2, Rounds: 2,
		WriteStats: s.Store.WriteStats,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NotOK != 0 || rep.Errors != 0 || rep.Join.SteadyKeys != 0 {
		t.Fatalf("%d non-OK answers, %d errors, %d keys written in the steady phases; want none",
			rep.NotOK, rep.Errors, rep.Join.SteadyKeys)
	}
}

func TestSummarize(t *testing.T) {
	var samples []time.Duration
	for i := 1000; i >= 1; i-- {
		samples = append(samples, time.Duration(i)*time.Microsecond)
	}
	got := summarize(samples)
	want := Latencies{P50: 500 * time.Microsecond, P99: 990 * time.Microsecond, P999: 999 * time.Microsecond, Max: 1000 * time.Microsecond}
	if got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
	if (summarize(nil) != Latencies{}) {
		t.Fatal("summarize(nil) is not zero")
	}
}
