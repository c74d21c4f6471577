// Command rscoord-bench measures rscoord against baselines taken in the
// same run.
//
//	rscoord-bench heartbeat --groups 1 --members 1000 --shards 1000 --duration 10s --conns 32
//	rscoord-bench heartbeat --groups 20 --members 1000 --interval 3s --duration 9s   # paced, 20,000 members
//	rscoord-bench converge --members 10 --shards 900 --join 1 --leave 1 --rounds 3
//	rscoord-bench dataplane --records 50000 --shards 8 --rounds 4
//	rscoord-bench scale --members 10000 --groups 1000
//	rscoord-bench failover --trials 5
//	rscoord-bench held --groups 20 --members 1000 --duration 10s
//	rscoord-bench cpu --members 1000 --conns 64 --duration 8s --rounds 2
//
// Each prints its figures beside a baseline from the same run (or
// repeated), and PASS or MISS beside each performance target.
//
// Without --server it starts a coordinator in this process on a temporary
// Pebble directory and a loopback port; without --redis, dataplane starts
// a redis-server of its own.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/bench"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/server"
)

// CLI is the command line of rscoord-bench.
type CLI struct {
	CPUProfile string `name:"cpuprofile" help:"Write a CPU profile of the whole run (client and in-process coordinator) to this file."`

	Heartbeat HeartbeatCmd `cmd:"" help:"Steady heartbeats against a coordinator, with a bare gin handler as baseline."`
	Converge  ConvergeCmd  `cmd:"" help:"Time for a group to converge after members join or leave."`
	Dataplane DataplaneCmd `cmd:"" help:"Producer and member runtime against raw go-redis loops on the same Redis."`
	Scale     ScaleCmd     `cmd:"" help:"Heap per idle member and restart time of an in-process coordinator holding many groups."`
	Held      HeldCmd      `cmd:"" help:"Members holding their steady heartbeats (waitMs) on keep-alive connections against rscoord serve: the server's memory per member and per parked answer, and the latency of the answers that were not held."`
	HeldLoad  HeldLoadCmd  `cmd:"" name:"held-load" hidden:"" help:"The held members' process of held --load-nice (steps on stdin, answers on stdout)."`
	CPU       CPUCmd       `cmd:"" name:"cpu" help:"Server CPU per heartbeat of rscoord serve (defaults, auth on) against a gin echo process, steady and held (HTTP/1.1 and h2c), loaded by this process."`
	GinEcho   GinEchoCmd   `cmd:"" name:"gin-echo" hidden:"" help:"The gin echo process of cpu (prints its URL, stops when stdin closes)."`
	Failover  FailoverCmd  `cmd:"" help:"Cluster mode on a real 3-member etcd: heartbeat throughput through the owner and a stand-by against a single-node Pebble server, and owner SIGKILL → first OK heartbeat."`
}

// Credentials are the credential flags of the rscoord CLI, with the same
// names and environment variables, for a coordinator with auth on.
type Credentials struct {
	User     string `env:"RSCOORD_USER" help:"User name sent with Basic credentials."`
	Password string `env:"RSCOORD_PASSWORD" help:"Password of --user (prefer the environment variable: ps shows flags)."`
	Token    string `env:"RSCOORD_TOKEN" help:"Bearer token from /auth/login, instead of --user/--password."`
}

// wire checks the flags and returns them for the wire layer.
func (c Credentials) wire() (coordclient.Credentials, error) {
	w := coordclient.Credentials{User: c.User, Password: c.Password, Token: c.Token}
	if _, err := w.Authorization(); err != nil {
		return w, fmt.Errorf("--user/--password/--token: %w", err)
	}
	return w, nil
}

// HeartbeatCmd runs bench.RunHeartbeat.
type HeartbeatCmd struct {
	Server   string        `help:"Coordinator base URL; empty starts one in this process."`
	Creds    Credentials   `embed:""`
	Groups   int           `default:"1" help:"Streams (each with its default group)."`
	Members  int           `default:"1000" help:"Members per group."`
	Shards   int           `default:"1000" help:"Shards per stream."`
	Duration time.Duration `default:"10s" help:"Length of each measured phase."`
	Conns    int           `default:"32" help:"Concurrent clients."`
	Interval time.Duration `default:"0" help:"Paced mode: every member heartbeats once per interval, phases spread over it (0: closed loop, as fast as answers come)."`
	Rounds   int           `default:"2" help:"Rounds; the order of coordinator and baseline alternates."`
	JSON     bool          `name:"json" help:"Print the report as JSON."`
}

// Performance targets (docs/benchmarks.md, Benchmarks).
const (
	targetHeartbeatRatio = 0.6
	targetPacedP99       = 10 * time.Millisecond
	targetConverge       = time.Second
	targetDataplaneRatio = 0.8
	targetPerMember      = 4096
	targetRestart        = 2 * time.Second
	targetJoinSettle     = 20 * time.Second
)

// bytesText formats a byte count or rate in KiB or MiB.
func bytesText(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// Run runs the benchmark and prints its report.
func (h *HeartbeatCmd) Run(ctx context.Context, out io.Writer) error {
	creds, err := h.Creds.wire()
	if err != nil {
		return err
	}
	server := h.Server
	var writeStats func() persistence.WriteStats
	if server == "" {
		c, err := startCoordinator(ctx, assign.Config{})
		if err != nil {
			return err
		}
		defer c.stop(ctx)
		server, writeStats = c.url, c.store.WriteStats
	}
	rep, err := bench.RunHeartbeat(ctx, bench.HeartbeatConfig{
		Server: server, Credentials: creds, Groups: h.Groups, Members: h.Members, Shards: h.Shards, Duration: h.Duration, Conns: h.Conns,
		Interval: h.Interval, Rounds: h.Rounds, WriteStats: writeStats,
	})
	if err != nil {
		return fmt.Errorf("heartbeat bench: %w", err)
	}
	if h.JSON {
		return printJSON(out, rep)
	}
	mode := "closed loop"
	if h.Interval > 0 {
		mode = fmt.Sprintf("paced: every member every %v = %.0f heartbeats/s offered", h.Interval, rep.Offered)
	}
	fmt.Fprintf(out, "heartbeat: %d groups × %d members = %d, %d shards, %d conns, %d rounds × %v per phase, %s\n",
		h.Groups, h.Members, h.Groups*h.Members, h.Shards, h.Conns, h.Rounds, h.Duration, mode)
	j := rep.Join
	fmt.Fprintf(out, "  join + settle %v in %d sweeps, %d heartbeats", j.Settle.Round(time.Millisecond), j.Sweeps, j.Heartbeats)
	if j.Measured {
		fmt.Fprintf(out, "; store wrote %d commits, %d keys, %s (%.0f keys/s, %s/s), largest commit %s; steady phases wrote %d keys",
			j.Commits, j.Keys, bytesText(float64(j.Bytes)), j.KeysPerSecond, bytesText(j.BytesPerSecond), bytesText(float64(j.MaxCommitBytes)), j.SteadyKeys)
	}
	fmt.Fprintf(out, "\n  target join + settle ≤ %v: %s\n", targetJoinSettle, verdict(j.Settle <= targetJoinSettle))
	for i, r := range rep.Rounds {
		fmt.Fprintf(out, "  round %d  coordinator %8.0f req/s p99 %-10v  baseline %8.0f req/s p99 %-10v  ratio %.2f\n", i+1,
			r.Coordinator.PerSecond, r.Coordinator.Latency.P99, r.Baseline.PerSecond, r.Baseline.Latency.P99, r.Ratio)
	}
	fmt.Fprintf(out, "  coordinator  %8.0f req/s  p50 %v  p99 %v  p999 %v  max %v  errors %d  not-OK %d\n",
		rep.PerSecond, rep.Latency.P50, rep.Latency.P99, rep.Latency.P999, rep.Latency.Max, rep.Errors, rep.NotOK)
	fmt.Fprintf(out, "  gin baseline %8.0f req/s  p50 %v  p99 %v  p999 %v  max %v  errors %d\n",
		rep.Baseline.PerSecond, rep.Baseline.Latency.P50, rep.Baseline.Latency.P99, rep.Baseline.Latency.P999,
		rep.Baseline.Latency.Max, rep.Baseline.Errors)
	if h.Interval > 0 {
		fmt.Fprintf(out, "  send lag     coordinator p99 %v max %v, baseline p99 %v max %v (client behind its schedule)\n",
			rep.Lag.P99, rep.Lag.Max, rep.Baseline.Lag.P99, rep.Baseline.Lag.Max)
		kept := rep.PerSecond / rep.Offered
		fmt.Fprintf(out, "  served %.2f of the offered rate; baseline p99 / coordinator p99 = %.2f\n", kept, rep.RatioToBase)
		fmt.Fprintf(out, "  target p99 ≤ %v at the offered rate: %s (p99 %v, %.2f of offered served)\n", targetPacedP99,
			verdict(rep.Latency.P99 <= targetPacedP99 && kept >= 0.95 && rep.Errors == 0), rep.Latency.P99, kept)
	} else {
		fmt.Fprintf(out, "  ratio        %.2f× baseline (rounds: %s)\n", rep.RatioToBase, roundRatios(rep.Rounds))
		fmt.Fprintf(out, "  target ≥ %.1f× baseline: %s\n", targetHeartbeatRatio,
			verdict(rep.RatioToBase >= targetHeartbeatRatio && rep.Errors == 0 && rep.NotOK == 0))
	}
	if rep.NotOK > 0 || rep.Errors > 0 {
		return fmt.Errorf("heartbeat bench: %d errors and %d non-OK answers in a steady group", rep.Errors, rep.NotOK)
	}
	return nil
}

func roundRatios(rs []bench.RoundResult) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.2f", r.Ratio)
	}
	return out
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// coordinator is a coordinator running in this process on a temporary
// Pebble directory and a loopback port: the production server (package
// server) with its HTTP limits, authentication off.
type coordinator struct {
	dir   string
	group assign.Config
	log   *slog.Logger
	url   string
	store *persistence.PebbleStore
	srv   *server.Server
}

// startCoordinator runs a coordinator on a new temporary directory; stop
// undoes everything.
func startCoordinator(ctx context.Context, group assign.Config) (*coordinator, error) {
	dir, err := os.MkdirTemp("", "rscoord-bench-")
	if err != nil {
		return nil, err
	}
	c := &coordinator{dir: dir, group: group,
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := c.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// start opens the store in c.dir and serves it on a new port.
func (c *coordinator) start(ctx context.Context) error {
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Logger, cfg.Auth = "127.0.0.1:0", c.dir, c.log, false
	cfg.Group = c.group.EnsureDefaults()
	srv, err := server.Open(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return err
	}
	c.srv, c.url = srv, srv.URL()
	c.store, _ = srv.Store().(*persistence.PebbleStore)
	return nil
}

// shutdown stops serving and closes the store, in production order, and
// keeps the directory.
func (c *coordinator) shutdown(ctx context.Context) error {
	if c.srv == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := c.srv.Close(sctx)
	c.srv, c.store = nil, nil
	return err
}

// stop shuts down and removes the directory.
func (c *coordinator) stop(ctx context.Context) {
	if err := errors.Join(c.shutdown(ctx), os.RemoveAll(c.dir)); err != nil {
		c.log.Error("stopping the bench coordinator", slog.Any("error", err))
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gin.SetMode(gin.ReleaseMode)
	var cli CLI
	k := kong.Parse(&cli, kong.Name("rscoord-bench"),
		kong.BindTo(ctx, (*context.Context)(nil)), kong.BindTo(io.Writer(os.Stdout), (*io.Writer)(nil)))
	if cli.CPUProfile != "" {
		f, err := os.Create(cli.CPUProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rscoord-bench: cpu profile:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := k.Run(); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "rscoord-bench:", err)
		os.Exit(1)
	}
}
