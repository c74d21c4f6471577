package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/bench"
	"github.com/rscoord/rscoord/client/redistest"
)

// DataplaneCmd runs bench.RunProducer and bench.RunConsumer.
type DataplaneCmd struct {
	Server  string      `help:"Coordinator base URL; empty starts one in this process."`
	Creds   Credentials `embed:""`
	Redis   string      `help:"Redis addresses, comma-separated (several: a cluster); empty starts a redis-server."`
	Shards  int         `default:"8" help:"Shards of the benchmark streams."`
	Records int         `default:"50000" help:"Records per phase and round."`
	Batch   int         `default:"64" help:"Records per pipeline / XREADGROUP COUNT."`
	Conns   int         `default:"4" help:"Concurrent publishers."`
	Workers int         `default:"4" help:"Consumer workers (member runtimeMaxConcurrency and raw goroutines)."`
	Rounds  int         `default:"4" help:"Rounds; the order of subject and baseline alternates."`
	JSON    bool        `name:"json" help:"Print the report as JSON."`
}

// Run runs both comparisons and prints them.
func (d *DataplaneCmd) Run(ctx context.Context, out io.Writer) error {
	creds, err := d.Creds.wire()
	if err != nil {
		return err
	}
	server := d.Server
	if server == "" {
		c, err := startCoordinator(ctx, assign.Config{})
		if err != nil {
			return err
		}
		defer c.stop(ctx)
		server = c.url
	}
	client, stopRedis, err := d.redis(ctx)
	if err != nil {
		return err
	}
	defer stopRedis()
	defer client.Close()

	const stream = "bench-producer"
	shards := d.Shards
	wire, err := bench.NewClient(server, creds)
	if err != nil {
		return err
	}
	err = bench.CreateStream(ctx, wire, stream, shards)
	wire.CloseIdleConnections()
	if err != nil {
		return err
	}
	if err := redistest.CreateShards(ctx, client, stream, shards, stream); err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	prod, err := bench.RunProducer(ctx, bench.DataplaneConfig{Coordinator: server, Credentials: creds, Redis: client, Stream: stream,
		Shards: shards, Records: d.Records, Batch: d.Batch, Conns: d.Conns, Rounds: d.Rounds})
	if err != nil {
		return fmt.Errorf("dataplane producer: %w", err)
	}
	cons, err := bench.RunConsumer(ctx, bench.ConsumerConfig{Coordinator: server, Credentials: creds, Redis: client, Shards: shards,
		Records: d.Records, Workers: d.Workers, Batch: d.Batch, Rounds: d.Rounds})
	if err != nil {
		return fmt.Errorf("dataplane consumer: %w", err)
	}
	prod.Target = targetDataplaneRatio
	all := append([]bench.Comparison{prod}, cons...)
	if d.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	fmt.Fprintf(out, "dataplane: %d records × %d rounds, %d shards, batch %d, %d workers\n", d.Records, d.Rounds, shards, d.Batch, d.Workers)
	for _, c := range all {
		fmt.Fprintf(out, "  %s\n    subject  %9.0f records/s\n    baseline %9.0f records/s\n    ratio    %.2f×   target ≥ %.2f×: %s\n",
			c.Name, c.Subject.PerSecond, c.Baseline.PerSecond, c.Ratio, c.Target, verdict(c.Ratio >= c.Target))
		if len(c.RoundRatios) > 0 {
			fmt.Fprintf(out, "    rounds   %s, median %.2f×: %s\n", ratioList(c.RoundRatios), c.MedianRatio, verdict(c.MedianRatio >= c.Target))
		}
	}
	return nil
}

// redis connects to --redis, or starts a redis-server of its own.
func (d *DataplaneCmd) redis(ctx context.Context) (redis.UniversalClient, func(), error) {
	if d.Redis != "" {
		addrs := strings.Split(d.Redis, ",")
		if len(addrs) > 1 {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}), func() {}, nil
		}
		return redis.NewClient(&redis.Options{Addr: addrs[0]}), func() {}, nil
	}
	dir, err := os.MkdirTemp("", "rscoord-bench-redis-")
	if err != nil {
		return nil, nil, err
	}
	srv, err := redistest.StartServer(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("dataplane: start redis-server: %w", err)
	}
	stop := func() {
		srv.Stop()
		os.RemoveAll(dir)
	}
	return redis.NewClient(&redis.Options{Addr: srv.Addr}), stop, nil
}

// ratioList formats ratios as "1.02× 0.97× …".
func ratioList(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f×", r)
	}
	return strings.Join(parts, " ")
}
