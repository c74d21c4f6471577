// Command rscoord-bench measures rscoord against baselines taken in the
// same run.
//
//	rscoord-bench heartbeat --groups 1 --members 1000 --shards 1000 --duration 10s --conns 32
//	rscoord-bench dataplane --records 50000 --shards 8 --rounds 4
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
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/bench"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/persistence"
)

// CLI is the command line of rscoord-bench.
type CLI struct {
	Heartbeat HeartbeatCmd `cmd:"" help:"Steady heartbeats against a coordinator, with a bare gin handler as baseline."`
	Dataplane DataplaneCmd `cmd:"" help:"Producer and member runtime against raw go-redis loops on the same Redis."`
}

// HeartbeatCmd runs bench.RunHeartbeat.
type HeartbeatCmd struct {
	Server   string        `help:"Coordinator base URL; empty starts one in this process."`
	Groups   int           `default:"1" help:"Streams (each with its default group)."`
	Members  int           `default:"1000" help:"Members per group."`
	Shards   int           `default:"1000" help:"Shards per stream."`
	Duration time.Duration `default:"10s" help:"Length of each measured phase."`
	Conns    int           `default:"32" help:"Concurrent clients."`
	JSON     bool          `name:"json" help:"Print the report as JSON."`
}

// Run runs the benchmark and prints its report.
func (h *HeartbeatCmd) Run(ctx context.Context, out io.Writer) error {
	server := h.Server
	if server == "" {
		url, stop, err := startCoordinator(ctx)
		if err != nil {
			return err
		}
		defer stop()
		server = url
	}
	rep, err := bench.RunHeartbeat(ctx, bench.HeartbeatConfig{
		Server: server, Groups: h.Groups, Members: h.Members, Shards: h.Shards, Duration: h.Duration, Conns: h.Conns,
	})
	if err != nil {
		return fmt.Errorf("heartbeat bench: %w", err)
	}
	if h.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "heartbeat: %d groups × %d members, %d shards, %d conns, %v per phase\n",
		h.Groups, h.Members, h.Shards, h.Conns, h.Duration)
	fmt.Fprintf(out, "  coordinator  %8.0f req/s  p50 %v  p99 %v  p999 %v  errors %d  not-OK %d\n",
		rep.PerSecond, rep.Latency.P50, rep.Latency.P99, rep.Latency.P999, rep.Errors, rep.NotOK)
	fmt.Fprintf(out, "  gin baseline %8.0f req/s  p50 %v  p99 %v  p999 %v\n",
		rep.Baseline.PerSecond, rep.Baseline.Latency.P50, rep.Baseline.Latency.P99, rep.Baseline.Latency.P999)
	fmt.Fprintf(out, "  ratio        %.2f× baseline\n", rep.RatioToBase)
	return nil
}

// startCoordinator runs a coordinator on a temporary directory and returns
// its URL and a stop function that undoes everything.
func startCoordinator(ctx context.Context) (string, func(), error) {
	dir, err := os.MkdirTemp("", "rscoord-bench-")
	if err != nil {
		return "", nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := persistence.OpenPebble(dir, persistence.Options{Logger: log})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	coord, err := actors.Start(ctx, actors.Config{Store: store, Logger: log})
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		coord.Close(ctx)
		store.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	gin.SetMode(gin.ReleaseMode)
	srv := &http.Server{Handler: gateway.New(coord, gateway.Options{Logger: log}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		coord.BeginShutdown()
		err := errors.Join(srv.Shutdown(sctx), coord.Close(sctx), store.Close(), os.RemoveAll(dir))
		if err != nil {
			log.Error("stopping the bench coordinator", slog.Any("error", err))
		}
	}
	return "http://" + ln.Addr().String(), stop, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gin.SetMode(gin.ReleaseMode)
	var cli CLI
	k := kong.Parse(&cli, kong.Name("rscoord-bench"),
		kong.BindTo(ctx, (*context.Context)(nil)), kong.BindTo(io.Writer(os.Stdout), (*io.Writer)(nil)))
	if err := k.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "rscoord-bench:", err)
		os.Exit(1)
	}
}
