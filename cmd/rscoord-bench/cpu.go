package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rscoord/rscoord/bench"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/gateway/auth"
)

// Targets of the CPU bench (docs/benchmarks.md): the server's CPU per
// steady heartbeat beside a bare gin echo's, a held answer over HTTP/2
// beside a steady heartbeat, and the answers not held while every member
// is held beside the echo's.
const (
	targetSteadyCPURatio = 1.3
	targetHeldOverSteady = 1.5
	targetHeldP99Ratio   = 2.0
)

// CPUCmd runs bench.RunCPU against rscoord serve and a gin echo, each a
// process of its own started by the bench.
type CPUCmd struct {
	Rscoord   string        `help:"rscoord binary; empty builds ./cmd/rscoord with the go command into a temporary directory."`
	Groups    int           `default:"1" help:"Streams (each with its default group)."`
	Members   int           `default:"1000" help:"Members per group."`
	Shards    int           `default:"1000" help:"Shards per stream."`
	Conns     int           `default:"64" help:"Clients of the steady phases."`
	Interval  time.Duration `default:"0s" help:"Pace the steady phases: every member heartbeats once per interval, so both servers answer the same rate (0: closed loop)."`
	Duration  time.Duration `default:"8s" help:"Length of each measured phase."`
	Rounds    int           `default:"2" help:"Rounds of every phase; the order of rscoord and the echo alternates."`
	Wait      time.Duration `default:"1s" help:"waitMs of the held phases (0: steady phases only)."`
	PerConn   int           `name:"members-per-conn" default:"100" help:"Held members sharing one HTTP/2 connection in the h2c phase."`
	Probes    int           `default:"20" help:"Members sending unheld heartbeats during the held phases (the answers not held, timed)."`
	ProbeRate float64       `default:"100" help:"Unheld heartbeats a second the probes send in all."`
	Profile   string        `placeholder:"DIR" help:"Save the server's CPU profile of each first phase (steady, held-http1, held-h2c) in DIR."`
	JSON      bool          `name:"json" help:"Print the report as JSON."`
}

// Run starts both servers, runs the bench and prints the report.
func (c *CPUCmd) Run(ctx context.Context, out io.Writer) error {
	members := c.Groups * c.Members
	dir, err := os.MkdirTemp("", "rscoord-bench-cpu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := rscoordBinary(ctx, c.Rscoord, dir)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	// Every member may hold a connection of its own (HTTP/1.1 holds),
	// on both sides of the loopback.
	connCap := max(4096, members+members/3+256)
	if err := raiseFDLimit(2*(members+c.Conns) + heldFDs); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	srv, err := startCPUServer(ctx, bin, dir, members, connCap)
	if err != nil {
		return err
	}
	defer srv.stop()
	echo, err := startEcho(ctx)
	if err != nil {
		return err
	}
	defer echo.stop()
	admin, err := bench.NewClient(srv.url, srv.admin)
	if err != nil {
		return err
	}
	defer admin.CloseIdleConnections()
	rep, err := bench.RunCPU(ctx, bench.CPUConfig{
		Coordinator: bench.CPUServer{URL: srv.url, CPU: srv.cpu},
		Baseline:    bench.CPUServer{URL: echo.url, CPU: bench.ProcessCPU(echo.cmd.Process.Pid)},
		Credentials: srv.member, Admin: srv.admin,
		Groups: c.Groups, Members: c.Members, Shards: c.Shards, Conns: c.Conns, Interval: c.Interval, Duration: c.Duration, Rounds: c.Rounds,
		Wait: c.Wait, PerConn: c.PerConn, Probes: c.Probes, ProbeRate: c.ProbeRate,
		OnPhase: c.profiler(admin, out),
	})
	if err != nil {
		return fmt.Errorf("cpu bench: %w; server log ends:\n%s", err, logTail(srv.log, 2048))
	}
	if c.JSON {
		return printJSON(out, rep)
	}
	printCPU(out, c, rep)
	return nil
}

func printCPU(out io.Writer, c *CPUCmd, rep bench.CPUReport) {
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3) }
	load := "closed loop"
	if c.Interval > 0 {
		load = fmt.Sprintf("paced, each member every %v", c.Interval)
	}
	fmt.Fprintf(out, "cpu: rscoord serve (defaults, auth on, a MEMBER with Basic credentials) against a gin echo process; %d groups × %d members, %d conns (%s), %d rounds × %v per phase\n",
		c.Groups, c.Members, c.Conns, load, c.Rounds, c.Duration)
	fmt.Fprintf(out, "  join + settle %v in %d sweeps\n", rep.Join.Settle.Round(time.Millisecond), rep.Join.Sweeps)
	line := func(name string, r int, p bench.CPUPair) {
		fmt.Fprintf(out, "  round %d %-10s rscoord %7.0f/s %9s/answer p99 %-9v (held %d, errors %d) | echo %7.0f/s %9s/answer p99 %-9v | CPU ratio %.2f, p99 ratio %.2f\n",
			r+1, name, p.Coordinator.PerSecond, us(p.Coordinator.PerAnswer), p.Coordinator.Latency.P99.Round(10*time.Microsecond), p.Coordinator.Held, p.Coordinator.Errors,
			p.Baseline.PerSecond, us(p.Baseline.PerAnswer), p.Baseline.Latency.P99.Round(10*time.Microsecond), p.Ratio, p.P99Ratio)
	}
	for i, r := range rep.Rounds {
		line("steady", i, r.Steady)
		if r.AtHeldRate != nil {
			line("steady@held", i, *r.AtHeldRate)
		}
		if r.HeldH1 != nil {
			line("held h1", i, *r.HeldH1)
			line("held h2c", i, *r.HeldH2C)
		}
		for _, p := range []*bench.CPUPair{r.HeldH1, r.HeldH2C} {
			if p == nil {
				continue
			}
			for _, ph := range []struct {
				name string
				p    bench.CPUPhase
			}{{"rscoord", p.Coordinator}, {"echo", p.Baseline}} {
				if ph.p.FirstError != "" {
					fmt.Fprintf(out, "    round %d %s: first of %d errors: %s\n", i+1, ph.name, ph.p.Errors, ph.p.FirstError)
				}
			}
		}
	}
	m := rep.Steady
	fmt.Fprintf(out, "  steady (median of rounds): server CPU %s per heartbeat, echo %s: %.2fx; target ≤ %.1fx: %s\n",
		us(m.Coordinator), us(m.Baseline), m.Ratio, targetSteadyCPURatio, verdict(m.Ratio <= targetSteadyCPURatio))
	for _, h := range []struct {
		name string
		m    *bench.CPUMedians
	}{{"held over HTTP/1.1", rep.HeldH1}, {"held over h2c", rep.HeldH2C}} {
		if h.m == nil {
			continue
		}
		fmt.Fprintf(out, "  %s (median): server CPU %s per answer (echo %s, %.2fx); over a steady heartbeat's: %.2fx closed loop, %.2fx at the held rate; target ≤ %.1fx: %s, %s; not-held p99 %.2fx the echo's; target ≤ %.1fx: %s\n",
			h.name, us(h.m.Coordinator), us(h.m.Baseline), h.m.Ratio, h.m.OverSteady, h.m.OverAtHeldRate, targetHeldOverSteady,
			verdict(h.m.OverSteady <= targetHeldOverSteady), verdict(h.m.OverAtHeldRate <= targetHeldOverSteady),
			h.m.P99Ratio, targetHeldP99Ratio, verdict(h.m.P99Ratio <= targetHeldP99Ratio))
	}
	fmt.Fprintln(out, "  CPU is each server process's utime+stime (/proc/PID/stat) over its phase, divided by the answers it sent; the machine's other load moves wall figures more than these.")
	if c.Wait > 0 {
		fmt.Fprintln(out, "  steady@held paces every member at one heartbeat per wait, not held: the held phases' rate. A server spends less per answer the more answers share a wake-up, so a closed-loop steady phase is cheaper per answer for its rate alone.")
	}
}

// cpuServer is the rscoord serve a CPU run measures.
type cpuServer struct {
	url           string
	member, admin coordclient.Credentials
	log           string
	cpu           func() (time.Duration, error)
	stop          func()
}

// startCPUServer starts rscoord serve with its defaults (auth on) but for
// --http2, which the h2c phase needs, and a connection cap raised to hold
// every member over HTTP/1.1 where the default would not; a MEMBER with
// READ on the bench's streams heartbeats with Basic credentials.
func startCPUServer(ctx context.Context, bin, dir string, members, connCap int) (cpuServer, error) {
	memberCreds := coordclient.Credentials{User: "bench-member", Password: randomSecret()}
	adminCreds := coordclient.Credentials{User: "admin", Password: randomSecret()}
	hash, err := auth.HashPassword(memberCreds.Password, 0)
	if err != nil {
		return cpuServer{}, err
	}
	users, err := json.Marshal(auth.UsersFile{Users: []auth.UserEntry{{Username: memberCreds.User, PasswordHash: string(hash),
		Roles: []string{}, Grants: []auth.GrantEntry{{Roles: []string{"MEMBER", "READ"}, Streams: []string{"bench*"}}}}}})
	if err != nil {
		return cpuServer{}, err
	}
	usersPath := filepath.Join(dir, "users.json")
	if err := os.WriteFile(usersPath, users, 0o600); err != nil {
		return cpuServer{}, err
	}
	port, err := freePort()
	if err != nil {
		return cpuServer{}, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := []string{"serve", "--listen", strings.TrimPrefix(url, "http://"), "--data-dir", filepath.Join(dir, "data"),
		"--users", usersPath, "--http2"}
	if connCap > 4096 {
		args = append(args, "--http-max-connections", strconv.Itoa(connCap))
	}
	logPath := filepath.Join(dir, "rscoord.log")
	p, err := startHeldServer(bin, url, logPath, args, adminCreds.Password)
	if err != nil {
		return cpuServer{}, err
	}
	if err := awaitReady(ctx, p, 60*time.Second); err != nil {
		p.kill(syscall.SIGTERM)
		return cpuServer{}, err
	}
	if warn := serverWarnings(logPath); warn != "" {
		p.kill(syscall.SIGTERM)
		return cpuServer{}, fmt.Errorf("cpu: the server did not take its limits: %s", warn)
	}
	return cpuServer{url: url, member: memberCreds, admin: adminCreds, log: logPath,
		cpu: bench.ProcessCPU(p.cmd.Process.Pid), stop: func() { p.kill(syscall.SIGTERM) }}, nil
}

// echoProc is the gin echo process.
type echoProc struct {
	url  string
	cmd  *exec.Cmd
	stop func()
}

// startEcho runs this binary's gin-echo command and reads its URL.
func startEcho(ctx context.Context) (echoProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return echoProc{}, fmt.Errorf("cpu: the echo runs this binary again: %w", err)
	}
	cmd := exec.Command(exe, "gin-echo")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return echoProc{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return echoProc{}, err
	}
	if err := cmd.Start(); err != nil {
		return echoProc{}, fmt.Errorf("cpu: start the echo: %w", err)
	}
	stop := func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		stop()
		return echoProc{}, fmt.Errorf("cpu: the echo did not say its address: %w", err)
	}
	return echoProc{url: strings.TrimSpace(line), cmd: cmd, stop: stop}, nil
}

// GinEchoCmd is the gin echo process of the cpu command: it serves
// bench.BaselineHandler on a loopback port, prints its URL and stops when
// stdin closes.
type GinEchoCmd struct{}

// Run serves until stdin closes or ctx ends.
func (GinEchoCmd) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return bench.ServeBaseline(ctx, "127.0.0.1:0", func(url string) { fmt.Println(url) })
}

// profiler is bench.CPUConfig.OnPhase for --profile: the server's CPU
// profile of each first phase, over its duration; nil without the flag.
func (c *CPUCmd) profiler(admin *coordclient.Client, out io.Writer) func(context.Context, string, bool) func() {
	if c.Profile == "" {
		return nil
	}
	return func(ctx context.Context, kind string, first bool) func() {
		if !first {
			return func() {}
		}
		if err := os.MkdirAll(c.Profile, 0o755); err != nil {
			fmt.Fprintf(out, "profile: %v\n", err)
			return func() {}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			secs := max(int(c.Duration.Seconds())-1, 1)
			raw, err := admin.Do(ctx, http.MethodGet, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), nil, nil)
			if err == nil {
				err = os.WriteFile(filepath.Join(c.Profile, kind+".pprof"), raw, 0o644)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(out, "profile %s: %v\n", kind, err)
			}
		}()
		return func() { <-done }
	}
}
