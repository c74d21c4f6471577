package bench

import (
	"context"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// TestRunHeldTiny runs the held-heartbeat bench at a tiny size against a
// server with auth on: members heartbeat as a MEMBER, every one of them is
// parked at once, churn members join and leave, and the server's memory is
// read through its admin endpoints.
func TestRunHeldTiny(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{
		HeartbeatInterval: 400 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
	}})
	member := coordclient.Credentials{User: coordtest.UserMember, Password: coordtest.Password(coordtest.UserMember)}
	admin := coordclient.Credentials{User: coordtest.UserAdmin, Password: coordtest.Password(coordtest.UserAdmin)}
	adminClient, err := NewClient(s.URL, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer adminClient.CloseIdleConnections()
	rep, err := RunHeld(context.Background(), HeldConfig{
		Server: s.URL, Member: member, Admin: admin, Groups: 2, Members: 4, Shards: 8, Conns: 4,
		Duration: 1500 * time.Millisecond, Churn: 4, ChurnLife: 500 * time.Millisecond,
		Memory: func(ctx context.Context) (ServerMemory, error) { return ReadServerMemory(ctx, adminClient) },
		// The server runs in this process: its CPU is the test's.
		ServerCPU: ProcessCPU(os.Getpid()),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Members != 8 || rep.Interval != 400*time.Millisecond || rep.HeldAtOnce < 8 {
		t.Fatalf("members %d, interval %v, held at once %d: want 8, 400ms, 8", rep.Members, rep.Interval, rep.HeldAtOnce)
	}
	if rep.Joined == 0 || rep.Left != rep.Joined || rep.NotHeldCount < 2*rep.Joined || rep.NotHeld.Max <= 0 {
		t.Fatalf("churn: %d joined, %d left, %d answers not held (max %v)", rep.Joined, rep.Left, rep.NotHeldCount, rep.NotHeld.Max)
	}
	// Each member was held about an interval at a time (a little over 3
	// intervals were measured), and joins released some parked answers.
	if rep.HeldCount < 8 || rep.Early == 0 || rep.Errors != 0 || rep.NotOK != 0 {
		t.Fatalf("held %d, early %d, errors %d, not OK %d", rep.HeldCount, rep.Early, rep.Errors, rep.NotOK)
	}
	for name, m := range map[string]ServerMemory{"groups": rep.Groups, "idle": rep.Idle, "parked": rep.Parked} {
		if m.HeapAlloc == 0 || m.StackInuse == 0 || m.RSS == 0 {
			t.Errorf("%s: server memory not read: %+v", name, m)
		}
	}
	if rep.CPU.Server <= 0 || rep.CPU.Bench <= 0 || rep.CPU.Load != -1 || rep.CPU.Answered < rep.HeldCount+rep.NotHeldCount ||
		rep.CPU.ServerPerAnswer() <= 0 || rep.CPU.ServerCores(rep.Measured) <= 0 {
		t.Errorf("CPU %+v over %v, %d held and %d not held answers", rep.CPU, rep.Measured, rep.HeldCount, rep.NotHeldCount)
	}
	if rep.Parked.StackInuse <= rep.Idle.StackInuse {
		t.Errorf("parked connections cost no stack: idle %+v, parked %+v", rep.Idle, rep.Parked)
	}
	// The server timed at least every churn answer it sent at once, and,
	// timing only part of each, no slower than the churn did: its p50
	// bucket bound lies within the bucket above the churn's own p50.
	if at := rep.ServerAtOnce; at == nil || at.Count < rep.NotHeldCount || at.P99 <= 0 || at.Within10ms <= 0 {
		t.Errorf("server-side answers sent at once %+v, the churn timed %d", at, rep.NotHeldCount)
	} else if at.P50 > 2*rep.NotHeld.P50+time.Millisecond {
		t.Errorf("server-side p50 ≤ %v, the churn's %v", at.P50, rep.NotHeld.P50)
	}
	// Every churn join and leave changed its group, so the server wrote
	// it at least once per join (leaves of several may share a write).
	if w := rep.GroupWrites; w == nil || w.Count < rep.Joined || w.P99 == 0 {
		t.Errorf("group writes %+v, %d churn members joined", w, rep.Joined)
	}
}

func TestTimedBetween(t *testing.T) {
	inf := math.Inf(1)
	before := histogramBuckets{0.001: 10, 0.01: 20, 0.1: 30, inf: 40}
	tests := []struct {
		name  string
		after histogramBuckets
		want  ServerTimed
	}{
		{"nothing", before, ServerTimed{P50: -1, P99: -1}},
		{"all within 1 ms", histogramBuckets{0.001: 110, 0.01: 120, 0.1: 130, inf: 140},
			ServerTimed{Count: 100, P50: time.Millisecond, P99: time.Millisecond, Within10ms: 1}},
		{"half over 10 ms, 2 past the last bucket", histogramBuckets{0.001: 40, 0.01: 70, 0.1: 128, inf: 140},
			ServerTimed{Count: 100, P50: 10 * time.Millisecond, P99: -1, Within10ms: 0.5}},
		{"p99 in the 100 ms bucket", histogramBuckets{0.001: 10, 0.01: 117, 0.1: 129, inf: 140},
			ServerTimed{Count: 100, P50: 10 * time.Millisecond, P99: 100 * time.Millisecond, Within10ms: 0.97}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := timedBetween(before, tc.after); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRunHeldTinyOverH2C: members sharing HTTP/2 connections, three to a
// connection, are all parked at once on at most four connections (theirs
// and the churn members').
func TestRunHeldTinyOverH2C(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{
		HeartbeatInterval: 400 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
	}})
	srv := gateway.NewHTTPServer(s.Handler(), gateway.HTTPLimits{HTTP2: true}, slog.New(slog.DiscardHandler), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		<-served
	}()
	url := "http://" + ln.Addr().String()
	member := coordclient.Credentials{User: coordtest.UserMember, Password: coordtest.Password(coordtest.UserMember)}
	admin := coordclient.Credentials{User: coordtest.UserAdmin, Password: coordtest.Password(coordtest.UserAdmin)}
	rep, err := RunHeld(context.Background(), HeldConfig{
		Server: url, Member: member, Admin: admin, Groups: 2, Members: 4, Shards: 8, Conns: 4,
		Duration: 1500 * time.Millisecond, Churn: 4, ChurnLife: 500 * time.Millisecond,
		H2C: true, MembersPerConn: 3,
		OpenFiles: func() (int, error) { return srv.OpenConnections(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.HeldAtOnce < 8 || rep.Connections > 4 || rep.Connections < 1 {
		t.Fatalf("held at once %d on %d connections: want 8 on at most 4", rep.HeldAtOnce, rep.Connections)
	}
	if rep.CPU.Server != -1 || rep.CPU.ServerPerAnswer() != -1 || rep.CPU.ServerCores(rep.Measured) != -1 {
		t.Errorf("server CPU known without a clock: %+v", rep.CPU)
	}
	if rep.Joined == 0 || rep.Left != rep.Joined || rep.HeldCount < 8 || rep.Errors != 0 || rep.NotOK != 0 {
		t.Fatalf("joined %d, left %d, held %d, errors %d, not OK %d", rep.Joined, rep.Left, rep.HeldCount, rep.Errors, rep.NotOK)
	}
}

// heldLoadChildEnv makes the test binary the held members' process
// (TestMain).
const heldLoadChildEnv = "RSCOORD_BENCH_HELD_LOAD_CHILD"

// TestRunHeldNicedLoad runs the held members in a process of their own
// (this test binary again) at niceness 5: every thread of it niced, the
// steps over its pipe, its counts and CPU back in the report.
func TestRunHeldNicedLoad(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Group: assign.Config{
		HeartbeatInterval: 400 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
	}})
	member := coordclient.Credentials{User: coordtest.UserMember, Password: coordtest.Password(coordtest.UserMember)}
	admin := coordclient.Credentials{User: coordtest.UserAdmin, Password: coordtest.Password(coordtest.UserAdmin)}
	rep, err := RunHeld(context.Background(), HeldConfig{
		Server: s.URL, Member: member, Admin: admin, Groups: 2, Members: 50, Shards: 20, Conns: 8,
		Duration: 1500 * time.Millisecond, Churn: 4, ChurnLife: 500 * time.Millisecond,
		LoadCommand: []string{os.Args[0]}, LoadEnv: []string{heldLoadChildEnv + "=1"}, LoadNice: 5,
		ServerCPU: ProcessCPU(os.Getpid()),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Members != 100 || rep.MembersHeld != 100 || rep.HeldAtOnce < 99 || rep.LoadThreads < 2 {
		t.Fatalf("members %d, held %d, at once %d, load threads %d: want 100, 100, 99, several", rep.Members, rep.MembersHeld, rep.HeldAtOnce, rep.LoadThreads)
	}
	// The held members' counts came back over the pipe: about one held
	// answer per member per interval over the phase.
	if rep.Load.Held < 100 || rep.Load.Measured < rep.Measured-time.Second || rep.HeldCount < rep.Load.Held ||
		rep.HeldTook.P50 < 300*time.Millisecond || rep.HeldPerSecond <= 0 || rep.AskedPerSecond != 250 {
		t.Fatalf("load %+v; held %d took %+v, %.0f a second of %.0f", rep.Load, rep.HeldCount, rep.HeldTook, rep.HeldPerSecond, rep.AskedPerSecond)
	}
	if rep.Joined == 0 || rep.Left != rep.Joined || rep.NotHeldCount < 2*rep.Joined || rep.Errors != 0 || rep.NotOK != 0 {
		t.Fatalf("churn: %d joined, %d left, %d not held; errors %d, not OK %d", rep.Joined, rep.Left, rep.NotHeldCount, rep.Errors, rep.NotOK)
	}
	if rep.ProberLag.Max <= 0 || rep.ProberLag.Max > rep.Measured {
		t.Fatalf("prober lag %+v over %v", rep.ProberLag, rep.Measured)
	}
	if rep.CPU.Load <= 0 || rep.CPU.Server <= 0 || rep.CPU.Bench <= 0 || rep.CPU.Answered < rep.HeldCount+rep.NotHeldCount {
		t.Fatalf("CPU %+v", rep.CPU)
	}
}

// TestRunHeldLoadProcessFails: a load process that dies at once ends the
// run with an error saying so.
func TestRunHeldLoadProcessFails(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	_, err := RunHeld(context.Background(), HeldConfig{
		Server: s.URL, Groups: 1, Members: 2, Shards: 2, Duration: time.Second, LoadCommand: []string{"false"},
	})
	if err == nil || !strings.Contains(err.Error(), "load process") {
		t.Fatalf("err = %v, want the load process's end", err)
	}
	_, err = RunHeld(context.Background(), HeldConfig{Server: s.URL, Groups: 1, Members: 2, Shards: 2, Duration: time.Second, LoadNice: 5})
	if err == nil || !strings.Contains(err.Error(), "niceness") {
		t.Fatalf("niceness without a load command: err = %v", err)
	}
}

// TestHeldVerdicts: the not-held p99 target passes only with answers
// timed, none failed, the p99 within target and the load met (every member
// held, at least 97% of the held answers a second asked).
func TestHeldVerdicts(t *testing.T) {
	good := HeldReport{Members: 20000, MembersHeld: 20000, HeldAtOnce: 19900, AskedPerSecond: 6667, HeldPerSecond: 6600,
		NotHeldCount: 400, NotHeld: Latencies{P99: 8 * time.Millisecond}}
	for _, tc := range []struct {
		name     string
		change   func(r *HeldReport)
		loadMet  bool
		pass     bool
		whyParts []string
	}{
		{name: "all good", change: func(*HeldReport) {}, loadMet: true, pass: true},
		{name: "load behind", change: func(r *HeldReport) { r.HeldPerSecond = 5700 }, whyParts: []string{"load not met", "5700 held answers a second of the 6667 asked"}},
		{name: "just met", change: func(r *HeldReport) { r.HeldPerSecond = 0.97 * 6667 }, loadMet: true, pass: true},
		{name: "not every member held", change: func(r *HeldReport) { r.MembersHeld = 19990 }, whyParts: []string{"only 19990 of 20000 members held"}},
		{name: "nothing asked", change: func(r *HeldReport) { r.AskedPerSecond = 0 }, whyParts: []string{"load not met"}},
		{name: "slow", change: func(r *HeldReport) { r.NotHeld.P99 = 11 * time.Millisecond }, loadMet: true, whyParts: []string{"p99 11ms over 10ms"}},
		{name: "slow and behind", change: func(r *HeldReport) { r.NotHeld.P99 = time.Second; r.HeldPerSecond = 100 },
			whyParts: []string{"p99 1s over 10ms", "load not met"}},
		{name: "nothing timed", change: func(r *HeldReport) { r.NotHeldCount = 0 }, loadMet: true, whyParts: []string{"no answers not held"}},
		{name: "errors", change: func(r *HeldReport) { r.Errors = 3 }, loadMet: true, whyParts: []string{"3 requests failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.change(&r)
			if met, why := r.LoadMet(); met != tc.loadMet || (met != (why == "")) {
				t.Errorf("LoadMet = %v, %q; want %v", met, why, tc.loadMet)
			}
			pass, why := r.MeetsNotHeldP99(10 * time.Millisecond)
			if pass != tc.pass || (pass != (why == "")) {
				t.Errorf("MeetsNotHeldP99 = %v, %q; want %v", pass, why, tc.pass)
			}
			for _, part := range tc.whyParts {
				if !strings.Contains(why, part) {
					t.Errorf("why %q does not say %q", why, part)
				}
			}
		})
	}
}

// TestReadServerProcess reads a server's CPU and open files from its
// /metrics as a run against --server does: the server runs in this
// process, so both must agree with what /proc says of it.
func TestReadServerProcess(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	admin, err := NewClient(s.URL, coordclient.Credentials{User: coordtest.UserAdmin, Password: coordtest.Password(coordtest.UserAdmin)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CloseIdleConnections()
	ctx := context.Background()
	before, err := ReadServerProcess(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := ReadServerProcess(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	self, err := ProcessCPU(os.Getpid())()
	if err != nil {
		t.Fatal(err)
	}
	if spun := after.CPU - before.CPU; spun < 50*time.Millisecond {
		t.Fatalf("200 ms of spinning read as %v of CPU from /metrics", spun)
	}
	if d := self - after.CPU; d < 0 || d > 100*time.Millisecond {
		t.Fatalf("/metrics says %v of CPU, /proc %v just after", after.CPU, self)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	if d := len(fds) - after.OpenFDs; after.OpenFDs < 3 || d < -8 || d > 8 {
		t.Fatalf("/metrics says %d open files, /proc %d", after.OpenFDs, len(fds))
	}
	if _, err := ReadServerProcess(ctx, mustClient(t, "http://127.0.0.1:1")); err == nil {
		t.Fatal("no error without a server")
	}
}

func mustClient(t *testing.T, url string) *coordclient.Client {
	t.Helper()
	c, err := NewClient(url, coordclient.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHeldAskedCores: each process's cores scale from the held answers a
// second got to those asked; an unknown figure or nothing held says so.
func TestHeldAskedCores(t *testing.T) {
	// 30 s measured: the server used 33.6 s of CPU (1.12 cores), the
	// members' process 18.6 s (0.62 cores), at 5,250 of 6,667 asked.
	base := HeldReport{Measured: 30 * time.Second, AskedPerSecond: 6667, HeldPerSecond: 5250,
		CPU: HeldCPU{Server: 33600 * time.Millisecond, Load: 18600 * time.Millisecond, Bench: 900 * time.Millisecond}}
	for _, tc := range []struct {
		name            string
		change          func(r *HeldReport)
		server, members float64
		ok              bool
	}{
		{name: "behind", change: func(*HeldReport) {}, server: 1.12 * 6667 / 5250, members: 0.62 * 6667 / 5250, ok: true},
		{name: "met", change: func(r *HeldReport) { r.HeldPerSecond = 6667 }, server: 1.12, members: 0.62, ok: true},
		{name: "members in the bench", change: func(r *HeldReport) { r.HeldPerSecond = 6667; r.CPU.Load = -1 }, server: 1.12, members: 0.03, ok: true},
		{name: "server unknown", change: func(r *HeldReport) { r.CPU.Server = -1 }},
		{name: "both load clocks unknown", change: func(r *HeldReport) { r.CPU.Load, r.CPU.Bench = -1, -1 }},
		{name: "nothing held", change: func(r *HeldReport) { r.HeldPerSecond = 0 }},
		{name: "nothing asked", change: func(r *HeldReport) { r.AskedPerSecond = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			tc.change(&r)
			server, members, ok := r.AskedCores()
			near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
			if ok != tc.ok || !near(server, tc.server) || !near(members, tc.members) {
				t.Errorf("AskedCores = %.4f, %.4f, %v; want %.4f, %.4f, %v", server, members, ok, tc.server, tc.members, tc.ok)
			}
		})
	}
}
