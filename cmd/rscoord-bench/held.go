package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rscoord/rscoord/bench"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/gateway/auth"
)

// Targets of the held-heartbeat bench (docs/benchmarks.md, Benchmarks): the answers
// that were not held stay fast while every member is parked, and a member
// costs the server at most 4 KiB besides its parked answer.
const (
	targetHeldNotHeldP99 = 10 * time.Millisecond
	targetHeldPerMember  = 4096
)

// HeldCmd runs bench.RunHeld against an `rscoord serve` it starts with
// its connection and held-heartbeat caps raised to fit every member.
type HeldCmd struct {
	Rscoord   string        `help:"rscoord binary; empty builds ./cmd/rscoord with the go command into a temporary directory."`
	Server    string        `help:"Base URL of a coordinator already running, on this host or another, instead of starting rscoord serve: its caps must hold every member (--http-max-connections, --max-held-heartbeats, --http2 for --h2c) and the credentials need ADMIN; its CPU and connections are then read from its /metrics (a Linux server's process_cpu_seconds_total and process_open_fds)."`
	Creds     Credentials   `embed:""`
	Groups    int           `default:"20" help:"Streams (each with its default group)."`
	Members   int           `default:"1000" help:"Members per group."`
	Shards    int           `default:"1000" help:"Shards per stream."`
	Conns     int           `default:"64" help:"Concurrency of the join (the held phase uses one connection per member, or per --members-per-conn with --h2c)."`
	H2C       bool          `name:"h2c" help:"Members speak HTTP/2 over cleartext (the server runs with --http2), --members-per-conn of them sharing a connection: 20,000 members fit under a file descriptor limit of 20,000."`
	PerConn   int           `name:"members-per-conn" default:"100" help:"Members sharing one HTTP/2 connection with --h2c (their held heartbeats are its streams)."`
	Duration  time.Duration `default:"20s" help:"Joins of the measured phase, every member held; it ends when the last churn member has left (--churn-life later)."`
	Churn     float64       `default:"10" help:"Members a second that join (and leave again after --churn-life) during the measured phase: each join and leave is an answer not held, timed (20 s at 10 a second: about 400 of them, enough for a p99); each releases the parked answers of the members whose shards it moves."`
	ChurnLife time.Duration `default:"0" help:"How long a churn member stays (0: three heartbeat intervals)."`
	Interval  time.Duration `default:"3s" help:"--heartbeat-interval of the server."`
	JSON      bool          `name:"json" help:"Print the report as JSON."`
	LoadNice  int           `name:"load-nice" default:"0" help:"Run the held members in a process of their own started with nice -n N (1–19), as members on other machines: the server and the timed churn get the CPU first, the load what is left (the report says whether it kept up). 0 runs them in the bench's process."`
	LoadProf  string        `name:"load-cpuprofile" placeholder:"FILE" help:"With --load-nice, write the held members' process's CPU profile to FILE."`
	Profile   string        `placeholder:"DIR" help:"Save the server's CPU profile and what it allocated (over the first 20 s of the measured phase at most), an execution trace (its first 5 s) and goroutine and heap profiles (at its start) in DIR, for go tool pprof and go tool trace."`
	Against   string        `placeholder:"BIN" help:"A baseline rscoord binary (the build before a change, say): run it and --rscoord alternately, --pairs times, each on a server of its own, and report each pair's not-held p99 and their ratio. Two runs minutes apart on a shared machine differ more than two builds do; the runs of a pair share its state."`
	Pairs     int           `default:"3" help:"Pairs of runs with --against."`
}

// heldMaxPerConn bounds --members-per-conn: the server's
// --http2-max-concurrent-streams is at most 1000 and gets 16 more.
const heldMaxPerConn = 984

// heldFDs is what the bench needs besides one descriptor a member: the
// churn members' and the admin's connections, its files.
const heldFDs = 512

// serverFDHeadroom is the descriptors rscoord serve keeps besides its
// connection cap (its listener, the store's files, logs).
const serverFDHeadroom = 256

// Run starts the server, runs the bench and prints the report.
func (h *HeldCmd) Run(ctx context.Context, out io.Writer) error {
	if h.Groups < 1 || h.Members < 1 || h.Shards < 1 || h.Conns < 1 || h.Duration <= 0 || h.Churn <= 0 || h.Interval <= 0 {
		return errors.New("held: --groups, --members, --shards, --conns, --duration, --churn and --interval must be positive")
	}
	if h.LoadNice < 0 || h.LoadNice > 19 {
		return fmt.Errorf("held: --load-nice %d must be between 0 (off) and 19", h.LoadNice)
	}
	if h.LoadProf != "" && h.LoadNice == 0 {
		return errors.New("held: --load-cpuprofile needs --load-nice (without it the members run in this process: --cpuprofile)")
	}
	if h.H2C && (h.PerConn < 1 || h.PerConn > heldMaxPerConn) {
		return fmt.Errorf("held: --members-per-conn %d must be between 1 and %d", h.PerConn, heldMaxPerConn)
	}
	if h.Against == "" {
		rep, caps, err := h.runOnce(ctx, out)
		if err != nil {
			return err
		}
		if h.JSON {
			return printJSON(out, rep)
		}
		printHeld(out, h, rep, caps.conns, caps.held)
		if rep.Errors > 0 {
			return fmt.Errorf("held bench: %d requests failed", rep.Errors)
		}
		return nil
	}
	switch {
	case h.Server != "":
		return errors.New("held: --against starts both servers itself: not with --server")
	case h.Profile != "" || h.LoadProf != "":
		return errors.New("held: --profile and --load-cpuprofile take one run: not with --against")
	case h.Pairs < 1:
		return fmt.Errorf("held: --pairs %d must be at least 1", h.Pairs)
	}
	return h.runPairs(ctx, out)
}

// heldCaps are the limits a held run's server was started with.
type heldCaps struct{ conns, held int }

// runOnce starts the server (unless --server), runs the bench once and
// returns its report.
func (h *HeldCmd) runOnce(ctx context.Context, out io.Writer) (bench.HeldReport, heldCaps, error) {
	members := h.Groups * h.Members
	life := h.ChurnLife
	if life <= 0 {
		life = 3 * h.Interval
	}
	// Every member parked, the churn members too, and room for the
	// unheld calls: the server holds at most three quarters of its
	// connection cap.
	held := members + int(h.Churn*life.Seconds()) + 64
	connCap := held + held/3 + 256
	clientFDs := members + heldFDs
	streams := 0
	if h.H2C {
		// A connection per --members-per-conn members and one for the
		// churn, the join's, and room: three quarters of the cap may be
		// busy with held answers, each carrying up to its streams (the
		// members' and a few in flight beside them).
		clients := (members+h.PerConn-1)/h.PerConn + 1
		connCap = 4*(clients+h.Conns)/3 + 256
		streams = h.PerConn + 16
		clientFDs = clients + h.Conns + heldFDs
	}
	// The server needs its connection cap plus the headroom it keeps for
	// its own files (else it lowers the cap, and with it the held ones);
	// the bench, one descriptor a connection and a few.
	need := max(connCap+serverFDHeadroom, clientFDs)
	if h.Server != "" {
		need = clientFDs
	}
	if err := raiseFDLimit(need); err != nil {
		return bench.HeldReport{}, heldCaps{}, fmt.Errorf("held: %w", err)
	}
	srv := heldServer{url: h.Server}
	if h.Server == "" {
		var err error
		srv, err = h.startServer(ctx, connCap, held, streams)
		if err != nil {
			return bench.HeldReport{}, heldCaps{}, err
		}
		defer srv.stop()
	} else {
		creds, err := h.Creds.wire()
		if err != nil {
			return bench.HeldReport{}, heldCaps{}, err
		}
		srv.member, srv.admin = creds, creds
	}
	admin, err := bench.NewClient(srv.url, srv.admin)
	if err != nil {
		return bench.HeldReport{}, heldCaps{}, err
	}
	defer admin.CloseIdleConnections()
	if srv.pid == 0 {
		srv.cpu = func() (time.Duration, error) {
			p, err := bench.ReadServerProcess(ctx, admin)
			return p.CPU, err
		}
		srv.fds = func() (int, error) {
			// Unknown (-1) rather than a failed run when the server does
			// not tell (not on Linux), like its CPU.
			p, err := bench.ReadServerProcess(ctx, admin)
			if err != nil {
				return -1, nil
			}
			return p.OpenFDs, nil
		}
	}
	var loadCmd []string
	if h.LoadNice > 0 {
		exe, err := os.Executable()
		if err != nil {
			return bench.HeldReport{}, heldCaps{}, fmt.Errorf("held: --load-nice runs this binary again: %w", err)
		}
		loadCmd = []string{exe}
		if h.LoadProf != "" {
			loadCmd = append(loadCmd, "--cpuprofile", h.LoadProf)
		}
		loadCmd = append(loadCmd, "held-load")
	}
	// The members' process spent a tenth of its CPU on the garbage
	// collector and another on growing stacks: those it shrank of members
	// parked between requests, and those of the goroutine HTTP/2 starts
	// for each request (adaptivestackstart starts them at the size they
	// reach). Memory is cheap beside that CPU; the environment's setting
	// wins where it has one.
	var loadEnv []string
	for _, kv := range [][2]string{{"GOGC", "400"}, {"GODEBUG", "gcshrinkstackoff=1,adaptivestackstart=1"}} {
		if _, set := os.LookupEnv(kv[0]); !set {
			loadEnv = append(loadEnv, kv[0]+"="+kv[1])
		}
	}
	rep, err := bench.RunHeld(ctx, bench.HeldConfig{
		LoadCommand: loadCmd, LoadEnv: loadEnv, LoadNice: h.LoadNice,
		Server: srv.url, Member: srv.member, Admin: srv.admin, Groups: h.Groups, Members: h.Members, Shards: h.Shards,
		Conns: h.Conns, Duration: h.Duration, Churn: h.Churn, ChurnLife: h.ChurnLife, H2C: h.H2C, MembersPerConn: h.PerConn,
		Memory:    func(ctx context.Context) (bench.ServerMemory, error) { return bench.ReadServerMemory(ctx, admin) },
		OpenFiles: srv.fds, ServerCPU: srv.cpu,
		OnMeasure: h.profiler(admin, out),
	})
	caps := heldCaps{conns: connCap, held: held}
	if err != nil {
		if srv.log == "" {
			return rep, caps, fmt.Errorf("held bench: %w", err)
		}
		// The directory goes with the run: show the end of the server's log.
		return rep, caps, fmt.Errorf("held bench: %w; server log ends:\n%s", err, logTail(srv.log, 4096))
	}
	return rep, caps, nil
}

// runPairs runs --rscoord and --against alternately, --pairs times, and
// reports each run in a line and the pairs compared. Every other pair runs
// the baseline first, so that a machine slowly getting busier or quieter
// favours neither build.
func (h *HeldCmd) runPairs(ctx context.Context, out io.Writer) error {
	bin := h.Rscoord
	if bin == "" {
		// Built once, not before each run: a build beside a run would be
		// measured with it.
		dir, err := os.MkdirTemp("", "rscoord-bench-held-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if bin, err = rscoordBinary(ctx, "", dir); err != nil {
			return fmt.Errorf("held: %w", err)
		}
	}
	type pairSide struct {
		name, bin string
		rep       *bench.HeldReport
	}
	var pairs []bench.HeldPair
	for i := range h.Pairs {
		var pair bench.HeldPair
		order := []pairSide{{"rscoord", bin, &pair.Run}, {"against", h.Against, &pair.Baseline}}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, side := range order {
			one := *h
			one.Rscoord, one.Against = side.bin, ""
			rep, _, err := one.runOnce(ctx, out)
			if err != nil {
				return fmt.Errorf("held pair %d, %s: %w", i+1, side.name, err)
			}
			*side.rep = rep
			if !h.JSON {
				fmt.Fprintf(out, "pair %d %-8s %s\n", i+1, side.name, heldLine(rep))
			}
		}
		pairs = append(pairs, pair)
	}
	cmp := bench.CompareHeld(pairs)
	if h.JSON {
		return printJSON(out, struct {
			Pairs      []bench.HeldPair     `json:"pairs"`
			Comparison bench.HeldComparison `json:"comparison"`
		}{pairs, cmp})
	}
	fmt.Fprintf(out, "not-held p99, --rscoord over --against: median %.2f (pairs: %s); lower in %d of %d pairs; load met in both runs of %d\n",
		cmp.MedianP99Ratio, ratiosText(cmp.P99Ratios), cmp.Lower, cmp.Pairs, cmp.LoadMet)
	for i, p := range pairs {
		if p.Run.Errors > 0 || p.Baseline.Errors > 0 {
			return fmt.Errorf("held bench: requests failed in pair %d (%d with --rscoord, %d with --against)", i+1, p.Run.Errors, p.Baseline.Errors)
		}
	}
	return nil
}

// heldLine is one run in a line: what a pair compares.
func heldLine(rep bench.HeldReport) string {
	line := fmt.Sprintf("not held p99 %v (p50 %v, %d answers)", rep.NotHeld.P99.Round(100*time.Microsecond), rep.NotHeld.P50.Round(100*time.Microsecond), rep.NotHeldCount)
	if at := rep.ServerAtOnce; at != nil {
		line += fmt.Sprintf("; server %.1f%% within 10 ms", 100*at.Within10ms)
	}
	met, _ := rep.LoadMet()
	line += fmt.Sprintf("; %.1f%% of the held answers asked", 100*rep.HeldPerSecond/max(rep.AskedPerSecond, 1))
	if !met {
		line += " (load not met)"
	}
	if cores := rep.CPU.ServerCores(rep.Measured); cores >= 0 {
		line += fmt.Sprintf("; server %.2f cores", cores)
	}
	if rep.Errors > 0 || rep.NotOK > 0 {
		line += fmt.Sprintf("; errors %d, not OK %d %v", rep.Errors, rep.NotOK, rep.NotOKByStatus)
	}
	return line
}

// ratiosText lists ratios with two decimals.
func ratiosText(ratios []float64) string {
	texts := make([]string, len(ratios))
	for i, r := range ratios {
		texts[i] = strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strings.Join(texts, ", ")
}

func printHeld(out io.Writer, h *HeldCmd, rep bench.HeldReport, connCap, held int) {
	server := fmt.Sprintf("server --http-max-connections %d --max-held-heartbeats %d", connCap, held)
	if h.Server != "" {
		server = "server " + h.Server + " (its own limits)"
	}
	fmt.Fprintf(out, "held: %d groups × %d members = %d, %d shards per stream, interval %v; %s\n",
		h.Groups, h.Members, rep.Members, h.Shards, rep.Interval, server)
	where := "in this process (no --load-nice): they share its CPU priority with the timed churn"
	if h.LoadNice > 0 {
		where = fmt.Sprintf("in a process of their own at nice %d (all %d of its threads), the churn at normal priority", h.LoadNice, rep.LoadThreads)
	}
	fmt.Fprintf(out, "  held members %s\n", where)
	fmt.Fprintf(out, "  join + settle %v (unheld, %d at a time)\n", rep.Settle.Round(time.Millisecond), h.Conns)
	transport := "HTTP/1.1, a connection per member"
	if h.H2C {
		transport = fmt.Sprintf("HTTP/2 over cleartext, %d members per connection", h.PerConn)
	}
	conns := "connections on the server unknown (not started by the bench)"
	if rep.Connections >= 0 {
		conns = fmt.Sprintf("%d connections more on the server with every member parked than idle", rep.Connections)
	}
	fmt.Fprintf(out, "  held phase over %s: %s\n", transport, conns)
	fmt.Fprintf(out, "  server memory after GC (heap + stacks / RSS): groups alone %s / %s, members idle %s / %s, every member parked (%d held) %s / %s\n",
		bytesText(float64(rep.Groups.Live())), bytesText(float64(rep.Groups.RSS)), bytesText(float64(rep.Idle.Live())), bytesText(float64(rep.Idle.RSS)),
		rep.HeldAtOnce, bytesText(float64(rep.Parked.Live())), bytesText(float64(rep.Parked.RSS)))
	parked := float64(max(rep.HeldAtOnce, 1))
	fmt.Fprintf(out, "  per member %s (RSS %s); per parked answer with its connection %s: heap %s, stack %s (RSS %s)\n",
		bytesText(rep.PerMember), bytesText(rep.RSSPerMember), bytesText(rep.PerParked),
		bytesText((float64(rep.Parked.HeapAlloc)-float64(rep.Idle.HeapAlloc))/parked), bytesText((float64(rep.Parked.StackInuse)-float64(rep.Idle.StackInuse))/parked),
		bytesText(rep.RSSPerParked))
	fmt.Fprintf(out, "  target per member ≤ %s plus one parked answer: %s\n", bytesText(targetHeldPerMember), verdict(rep.PerMember <= targetHeldPerMember))
	fmt.Fprintf(out, "  measured %v (%v of joins, then the last churn member's life), load average %.1f → %.1f: %d churn members joined, %d left\n",
		rep.Measured.Round(time.Millisecond), h.Duration, rep.LoadStart, rep.LoadEnd, rep.Joined, rep.Left)
	fmt.Fprintf(out, "  not held (churn members' joins, leaves, reports): %d answers  p50 %v  p99 %v  p999 %v  max %v\n", rep.NotHeldCount,
		rep.NotHeld.P50, rep.NotHeld.P99, rep.NotHeld.P999, rep.NotHeld.Max)
	if at := rep.ServerAtOnce; at != nil {
		fmt.Fprintf(out, "  the server's own timing of what it answered at once (decoded request to response, its histogram's buckets): %d answers  p50 ≤ %s  p99 ≤ %s  %.1f%% within 10 ms\n",
			at.Count, bucketText(at.P50), bucketText(at.P99), 100*at.Within10ms)
	}
	if w := rep.GroupWrites; w != nil {
		fmt.Fprintf(out, "  the server's synced group writes (an answer that changed its group waits for one): %d writes  p50 ≤ %s  p99 ≤ %s  %.1f%% within 10 ms\n",
			w.Count, bucketText(w.P50), bucketText(w.P99), 100*w.Within10ms)
	}
	fmt.Fprintf(out, "  the bench's own wait for a CPU (a 10 ms sleep's lateness, inside every time it took): p50 %v  p99 %v  max %v\n",
		rep.ProberLag.P50, rep.ProberLag.P99, rep.ProberLag.Max)
	fmt.Fprintf(out, "  held members' answers not held (reports of revoked shards, timed in their process): %d  p50 %v  p99 %v  max %v\n",
		rep.Load.NotHeld, rep.Load.NotHeldTook.P50, rep.Load.NotHeldTook.P99, rep.Load.NotHeldTook.Max)
	fmt.Fprintf(out, "  held: %d answers, %d early with news, %d at once without news; errors %d, not OK %d %v\n",
		rep.HeldCount, rep.Early, rep.AtOnce, rep.Errors, rep.NotOK, rep.NotOKByStatus)
	fmt.Fprintf(out, "  held members' held requests took p50 %v  p99 %v  max %v\n", rep.HeldTook.P50, rep.HeldTook.P99, rep.HeldTook.Max)
	met, why := rep.LoadMet()
	metText := "met"
	if !met {
		metText = "NOT met: " + why
	}
	fmt.Fprintf(out, "  offered load: %.0f held answers a second of the %.0f asked (%.1f%%), %d of %d members held (%d at once): %s\n",
		rep.HeldPerSecond, rep.AskedPerSecond, 100*rep.HeldPerSecond/rep.AskedPerSecond, rep.MembersHeld, rep.Members, rep.HeldAtOnce, metText)
	fmt.Fprintf(out, "  %s\n", cpuText(rep))
	pass, why := rep.MeetsNotHeldP99(targetHeldNotHeldP99)
	fmt.Fprintf(out, "  target not-held p99 ≤ %v with the load met: %s", targetHeldNotHeldP99, verdict(pass))
	if !pass {
		fmt.Fprintf(out, " (%s)", why)
	}
	fmt.Fprintln(out)
}

// heldServer is the coordinator the held bench measures: one it started
// (its process known: pid, log, stop) or one given with --server. cpu and
// fds read the CPU time it used so far and its open file descriptors:
// from /proc for the one started, from its /metrics for the other.
type heldServer struct {
	url           string
	member, admin coordclient.Credentials
	pid           int
	log           string
	stop          func()
	cpu           func() (time.Duration, error)
	fds           func() (int, error)
}

// startServer starts rscoord serve (built, or --rscoord) on a free port
// with auth on, a MEMBER scoped to the bench's streams and an admin, and
// its caps raised to hold every member.
func (h *HeldCmd) startServer(ctx context.Context, connCap, held, streams int) (heldServer, error) {
	dir, err := os.MkdirTemp("", "rscoord-bench-held-")
	if err != nil {
		return heldServer{}, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	bin, err := rscoordBinary(ctx, h.Rscoord, dir)
	if err != nil {
		return heldServer{}, fmt.Errorf("held: %w", err)
	}
	// A MEMBER scoped to the bench's streams heartbeats; the admin creates
	// the streams and reads the server's memory.
	memberCreds := coordclient.Credentials{User: "bench-member", Password: randomSecret()}
	adminCreds := coordclient.Credentials{User: "admin", Password: randomSecret()}
	hash, err := auth.HashPassword(memberCreds.Password, 0)
	if err != nil {
		return heldServer{}, err
	}
	users, err := json.Marshal(auth.UsersFile{Users: []auth.UserEntry{{Username: memberCreds.User, PasswordHash: string(hash),
		Roles: []string{}, Grants: []auth.GrantEntry{{Roles: []string{"MEMBER"}, Streams: []string{"held*"}}}}}})
	if err != nil {
		return heldServer{}, err
	}
	usersPath := filepath.Join(dir, "users.json")
	if err := os.WriteFile(usersPath, users, 0o600); err != nil {
		return heldServer{}, err
	}
	port, err := freePort()
	if err != nil {
		return heldServer{}, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := []string{"serve", "--listen", strings.TrimPrefix(url, "http://"), "--data-dir", filepath.Join(dir, "data"),
		"--users", usersPath, "--heartbeat-interval", h.Interval.String(),
		"--http-max-connections", strconv.Itoa(connCap), "--max-held-heartbeats", strconv.Itoa(held),
		"--log-format", "json", "--log-level", "info"}
	if h.H2C {
		args = append(args, "--http2", "--http2-max-concurrent-streams", strconv.Itoa(streams))
	}
	logPath := filepath.Join(dir, "rscoord.log")
	p, err := startHeldServer(bin, url, logPath, args, adminCreds.Password)
	if err != nil {
		return heldServer{}, err
	}
	stop := func() {
		p.kill(syscall.SIGTERM)
		os.RemoveAll(dir)
	}
	if err := awaitReady(ctx, p, 60*time.Second); err != nil {
		p.kill(syscall.SIGTERM)
		return heldServer{}, err
	}
	if warn := serverWarnings(logPath); warn != "" {
		p.kill(syscall.SIGTERM)
		return heldServer{}, fmt.Errorf("held: the server did not take its limits (log %s): %s", logPath, warn)
	}
	ok = true
	return heldServer{url: url, member: memberCreds, admin: adminCreds, pid: p.cmd.Process.Pid, log: logPath, stop: stop,
		cpu: bench.ProcessCPU(p.cmd.Process.Pid), fds: func() (int, error) { return openFiles(p.cmd.Process.Pid) }}, nil
}

// cpuText says what CPU the processes used over the measured phase.
func cpuText(rep bench.HeldReport) string {
	secs := rep.Measured.Seconds()
	cores := func(d time.Duration) string {
		if d < 0 {
			return "unknown"
		}
		return fmt.Sprintf("%.2f cores", d.Seconds()/secs)
	}
	server := "server CPU unknown (not started by the bench)"
	if rep.CPU.Server >= 0 {
		server = fmt.Sprintf("server %s, %.0f µs of CPU per heartbeat answered (%d answered, %.0f a second)",
			cores(rep.CPU.Server), float64(rep.CPU.ServerPerAnswer().Nanoseconds())/1e3, rep.CPU.Answered, float64(rep.CPU.Answered)/secs)
	}
	text := "CPU over the measured phase: " + server
	if rep.CPU.Load >= 0 {
		text += fmt.Sprintf("; held members' process %s; bench (churn, readings) %s", cores(rep.CPU.Load), cores(rep.CPU.Bench))
	} else {
		text += fmt.Sprintf("; bench (held members and churn) %s", cores(rep.CPU.Bench))
	}
	if s, m, ok := rep.AskedCores(); ok {
		text += fmt.Sprintf("\n  CPU the asked load takes at these costs: server %.2f + members %.2f = %.2f cores of the %d this machine has",
			s, m, s+m, runtime.NumCPU())
	}
	return text
}

// HeldLoadCmd is the process running held's members with --load-nice:
// it takes its steps on stdin and answers on stdout (bench.ServeHeldLoad).
type HeldLoadCmd struct{}

// Run serves the held bench's steps until it stops or closes the pipe.
func (HeldLoadCmd) Run(ctx context.Context) error {
	return bench.ServeHeldLoad(ctx, os.Stdin, os.Stdout)
}

// startHeldServer starts the server as startProc does, with the admin
// password it is given.
func startHeldServer(bin, url, logPath string, args []string, adminPassword string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "RSCOORD_ADMIN_PASSWORD="+adminPassword, "RSCOORD_TOKEN_SECRET=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start rscoord: %w", err)
	}
	p := &proc{name: "rscoord", url: url, args: args, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// logTail is the last n bytes of the file at path.
func logTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(raw[max(0, len(raw)-n):])
}

// serverWarnings is the server's warnings that it lowered a limit, from
// its log.
func serverWarnings(logPath string) string {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "lowered") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}

// raiseFDLimit makes this process's file descriptor limit at least need,
// soft and hard: raising the hard limit needs privileges, raising the soft
// one up to the hard one does not. Children inherit it (the server the
// bench starts).
func raiseFDLimit(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("file descriptor limit: %w", err)
	}
	if lim.Cur >= uint64(need) {
		return nil
	}
	want := syscall.Rlimit{Cur: uint64(need), Max: max(lim.Max, uint64(need))}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
		return nil
	}
	if lim.Max >= uint64(need) {
		want = syscall.Rlimit{Cur: uint64(need), Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return fmt.Errorf("file descriptor limit: raise the soft limit to %d: %w", need, err)
		}
		return nil
	}
	return fmt.Errorf("%d file descriptors are needed (one a connection, on both sides), the hard limit is %d: raise it (ulimit -Hn, as root) or run fewer members", need, lim.Max)
}

// profiler is bench.HeldConfig.OnMeasure for --profile: it saves the
// server's profiles into h.Profile; nil without the flag.
func (h *HeldCmd) profiler(admin *coordclient.Client, out io.Writer) func(context.Context) {
	if h.Profile == "" {
		return nil
	}
	return func(ctx context.Context) {
		if err := os.MkdirAll(h.Profile, 0o755); err != nil {
			fmt.Fprintf(out, "profile: %v\n", err)
			return
		}
		cpu := min(h.Duration, 20*time.Second)
		var wg sync.WaitGroup
		for file, path := range map[string]string{
			"cpu.pprof":       fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(int(cpu.Seconds()), 1)),
			"allocs.pprof":    fmt.Sprintf("/debug/pprof/allocs?seconds=%d", max(int(cpu.Seconds()), 1)),
			"trace.out":       "/debug/pprof/trace?seconds=5",
			"goroutine.pprof": "/debug/pprof/goroutine",
			"heap.pprof":      "/debug/pprof/heap",
		} {
			wg.Go(func() {
				raw, err := admin.Do(ctx, http.MethodGet, path, nil, nil)
				if err == nil {
					err = os.WriteFile(filepath.Join(h.Profile, file), raw, 0o644)
				}
				if err != nil {
					fmt.Fprintf(out, "profile %s: %v\n", file, err)
				}
			})
		}
		wg.Wait()
	}
}

// openFiles counts the open file descriptors of process pid.
func openFiles(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}

func randomSecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// rscoordBinary is bin, or when bin is empty ./cmd/rscoord built with the
// go command into dir.
func rscoordBinary(ctx context.Context, bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "rscoord")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/rscoord/rscoord/cmd/rscoord")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build rscoord (or pass --rscoord): %w", err)
	}
	return bin, nil
}

// bucketText is a histogram bound: -1 is past the last bucket.
func bucketText(d time.Duration) string {
	if d < 0 {
		return "∞"
	}
	return d.String()
}
