package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/persistence"
)

// ServeCmd runs the coordinator server. Every flag can also be set from the
// RSCOORD_… environment variable named in its tag.
type ServeCmd struct {
	Listen               string        `default:"127.0.0.1:8080" env:"RSCOORD_LISTEN" help:"Address the HTTP API listens on."`
	DataDir              string        `default:"./data" env:"RSCOORD_DATA_DIR" help:"Directory of the embedded Pebble store."`
	HeartbeatInterval    time.Duration `default:"3s" env:"RSCOORD_HEARTBEAT_INTERVAL" help:"Heartbeat interval answered to members."`
	MemberLease          time.Duration `default:"15s" env:"RSCOORD_MEMBER_LEASE" help:"Member lease TTL."`
	RebalanceTimeout     time.Duration `default:"60s" env:"RSCOORD_REBALANCE_TIMEOUT" help:"How long a member may hold revoked shards before it is fenced."`
	DefaultShards        int           `default:"4" env:"RSCOORD_DEFAULT_SHARDS" help:"Shard count of a stream created without one."`
	StaleMemberRetention time.Duration `default:"10m" env:"RSCOORD_STALE_MEMBER_RETENTION" help:"How long expired, fenced and left members stay visible."`
	AutoCreateGroups     bool          `default:"true" negatable:"" env:"RSCOORD_AUTO_CREATE_GROUPS" help:"Register an unknown group of a known stream on its first join."`
	ShutdownTimeout      time.Duration `default:"30s" env:"RSCOORD_SHUTDOWN_TIMEOUT" help:"How long in-flight requests may take to finish on SIGTERM."`
	LogLevel             slog.Level    `default:"info" env:"RSCOORD_LOG_LEVEL" help:"Lowest log level written: debug, info, warn or error."`
	LogFormat            string        `default:"text" enum:"text,json" env:"RSCOORD_LOG_FORMAT" help:"Log format on stderr: text or json."`
}

func (s *ServeCmd) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// Run starts the server and blocks until ctx is done (SIGINT/SIGTERM), then
// shuts down in order:
//
//  1. the coordinator stops taking mutations (503 COORDINATOR_TERMINATING)
//     and answers heartbeats RETRY, so members keep their shards;
//  2. the HTTP server stops accepting and waits for in-flight requests,
//     at most ShutdownTimeout;
//  3. the actors stop, each after the message it is handling;
//  4. the store closes, so Pebble's files are clean for the next start.
func (s *ServeCmd) Run(ctx context.Context) error {
	log := s.logger()
	store, err := persistence.OpenPebble(s.DataDir, persistence.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("serve: open store: %w", err)
	}
	coord, err := actors.Start(ctx, actors.Config{
		Store: store,
		Group: assign.Config{
			HeartbeatInterval:    s.HeartbeatInterval,
			MemberLease:          s.MemberLease,
			RebalanceTimeout:     s.RebalanceTimeout,
			StaleMemberRetention: s.StaleMemberRetention,
		},
		DefaultShards:    s.DefaultShards,
		AutoCreateGroups: s.AutoCreateGroups,
		Logger:           log,
	})
	if err != nil {
		return errors.Join(fmt.Errorf("serve: %w", err), store.Close())
	}
	gin.SetMode(gin.ReleaseMode)
	srv := &http.Server{
		Handler:           gateway.New(coord, gateway.Options{Logger: log}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("serve: listen on %s: %w", s.Listen, err), coord.Close(closeCtx), store.Close())
	}
	log.Info("rscoord listening", slog.String("address", ln.Addr().String()), slog.String("dataDir", s.DataDir))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", slog.Duration("timeout", s.ShutdownTimeout))
	case serveErr = <-served:
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	coord.BeginShutdown()
	httpErr := srv.Shutdown(closeCtx)
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	err = errors.Join(serveErr, httpErr, coord.Close(closeCtx), store.Close())
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("rscoord stopped cleanly")
	return nil
}
