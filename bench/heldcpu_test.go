package bench

import (
	"context"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// echoServer serves the gin echo as the cpu command's process does, in
// this process, until the test ends.
func echoServer(t *testing.T) string {
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- ServeBaseline(ctx, "127.0.0.1:0", func(u string) { urls <- u }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return poll.Receive(t, 10*time.Second, urls, "the echo's URL")
}

// Both servers' CPU comes from this process here: the figures are only
// checked for being there and in order, not for their size.
func TestRunCPUStaysSteadyAgainstARealCoordinator(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	echo := echoServer(t)
	rep, err := RunCPU(context.Background(), CPUConfig{
		Coordinator: CPUServer{URL: s.URL, CPU: selfCPU}, Baseline: CPUServer{URL: echo, CPU: selfCPU},
		Groups: 1, Members: 6, Shards: 12, Conns: 3, Duration: 300 * time.Millisecond, Rounds: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 || rep.HeldH1 != nil {
		t.Fatalf("rounds: %+v", rep.Rounds)
	}
	for i, r := range rep.Rounds {
		for _, p := range []CPUPhase{r.Steady.Coordinator, r.Steady.Baseline} {
			if p.Answers == 0 || p.Errors != 0 || p.CPU <= 0 || p.PerAnswer <= 0 || p.Latency.P99 <= 0 {
				t.Fatalf("round %d: phase %+v", i+1, p)
			}
		}
	}
	if rep.Steady.Ratio <= 0 || rep.Steady.Coordinator <= 0 || rep.Steady.Baseline <= 0 {
		t.Fatalf("medians: %+v", rep.Steady)
	}
}

// Held members keep their heartbeats held for the wait, over HTTP/1.1
// at the coordinator and over h2c at the echo, while the probes' answers
// come at once.
func TestHeldCPUHoldsEveryMemberButTheProbes(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	echo := echoServer(t)
	ctx := context.Background()
	coord, err := newClient(s.URL, coordclient.Credentials{}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer coord.CloseIdleConnections()
	if err := CreateStream(ctx, coord, benchPrefix(0), 12); err != nil {
		t.Fatal(err)
	}
	members, _, _, err := joinAll(ctx, coord, HeartbeatConfig{Groups: 1, Members: 6, Conns: 3})
	if err != nil {
		t.Fatal(err)
	}
	cfg := CPUConfig{Wait: 200 * time.Millisecond, Duration: 500 * time.Millisecond, PerConn: 2, Probes: 2, ProbeRate: 20}
	base, err := newClient(echo, coordclient.Credentials{}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer base.CloseIdleConnections()
	for _, tc := range []struct {
		name   string
		srv    CPUServer
		client *coordclient.Client
		take   bool
		h2c    bool
	}{
		{"coordinator over HTTP/1.1", CPUServer{URL: s.URL, CPU: selfCPU}, coord, true, false},
		{"echo over h2c", CPUServer{URL: echo, CPU: selfCPU}, base, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := heldCPU(ctx, cfg, tc.srv, tc.client, members, tc.take, tc.h2c)
			if err != nil {
				t.Fatal(err)
			}
			if p.Errors != 0 || p.Held == 0 || p.Answers <= p.Held || p.Latency.P99 <= 0 || p.Latency.P99 >= cfg.Wait || p.PerAnswer <= 0 {
				t.Fatalf("phase: %+v", p)
			}
		})
	}
}

// With a wait, every round also runs a steady phase paced at the held
// phases' rate, and the held answers are set beside it: at the same rate
// both servers answer about as many heartbeats.
func TestRunCPUPacesASteadyPhaseAtTheHeldRate(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	echo := echoServer(t)
	const members, wait, phase = 6, 100 * time.Millisecond, 500 * time.Millisecond
	rep, err := RunCPU(context.Background(), CPUConfig{
		Coordinator: CPUServer{URL: s.URL, CPU: selfCPU}, Baseline: CPUServer{URL: echo, CPU: selfCPU},
		Groups: 1, Members: members, Shards: 12, Conns: 3, Duration: phase, Rounds: 1,
		Wait: wait, PerConn: 2, Probes: 2, ProbeRate: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Rounds[0]
	if r.AtHeldRate == nil || rep.HeldH1 == nil || rep.HeldH2C == nil {
		t.Fatalf("round: %+v", r)
	}
	// Every member once per wait over the phase, give or take a sweep.
	want := int(phase/wait) * members
	for _, p := range []CPUPhase{r.AtHeldRate.Coordinator, r.AtHeldRate.Baseline} {
		if p.Errors != 0 || p.Answers < want-members || p.Answers > want+members || p.PerAnswer <= 0 {
			t.Fatalf("steady phase at the held rate: %d answers, want %d ± %d: %+v", p.Answers, want, members, p)
		}
	}
	if rep.HeldH1.OverAtHeldRate <= 0 || rep.HeldH2C.OverAtHeldRate <= 0 {
		t.Fatalf("held over steady at the held rate: %v, %v", rep.HeldH1.OverAtHeldRate, rep.HeldH2C.OverAtHeldRate)
	}
}
