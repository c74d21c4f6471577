// Command tally runs the tally service (package tally) until SIGTERM or
// SIGINT: it sums the field "n" of every record of a stream's shards.
//
//	tally -coordinator http://127.0.0.1:8080 -redis 127.0.0.1:6379 -stream orders -workers 4
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/examples/tally"
	"github.com/rscoord/rscoord/client/redisconn"
)

func main() {
	coord := flag.String("coordinator", "http://127.0.0.1:8080", "coordinator base URLs, comma-separated")
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	stream := flag.String("stream", "orders", "stream prefix")
	workers := flag.Int("workers", 4, "records handled at once")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	redis.SetLogger(redisconn.NewLogger(log)) // go-redis's own lines too (one logger per process)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()

	svc, err := tally.New(tally.Config{
		Coordinator: strings.Split(*coord, ","), Stream: *stream, Redis: rdb, Workers: *workers, Log: log,
	})
	if err != nil {
		log.Error("tally", "err", err)
		os.Exit(2)
	}
	if err := svc.Run(ctx); err != nil {
		log.Error("tally", "err", err)
		os.Exit(1)
	}
	log.Info("tally stopped", "records", svc.Records(), "totals", svc.Totals())
}
