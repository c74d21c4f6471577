package bench

import (
	"context"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/internal/coordtest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

func TestRunHeartbeatAgainstARealCoordinator(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	rep, err := RunHeartbeat(context.Background(), HeartbeatConfig{
		Server: s.URL, Groups: 2, Members: 5, Shards: 12, Duration: 300 * time.Millisecond, Conns: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests == 0 || rep.PerSecond <= 0 || rep.Baseline.Requests == 0 || rep.RatioToBase <= 0 {
		t.Fatalf("empty report: %+v", rep)
	}
	if rep.NotOK != 0 || rep.Errors != 0 {
		t.Fatalf("a steady group answered %d non-OK heartbeats and %d errors", rep.NotOK, rep.Errors)
	}
	if rep.Latency.P50 <= 0 || rep.Latency.P50 > rep.Latency.P99 || rep.Latency.P99 > rep.Latency.Max {
		t.Fatalf("latencies out of order: %+v", rep.Latency)
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
