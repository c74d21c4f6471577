package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/bench"
	"github.com/rscoord/rscoord/client/coordclient"
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
	Rounds  int         `default:"4" help:"Rounds; the order of subject and baseline alternates (the consumers: one more, a warm-up, is not counted)."`
	// Producer is off with --no-producer.
	Producer bool `default:"true" negatable:"" help:"Compare the producer too (--no-producer: the consumers only)."`
	JSON     bool `name:"json" help:"Print the report as JSON."`
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
	client, redisCPU, stopRedis, err := d.redis(ctx)
	if err != nil {
		return err
	}
	defer stopRedis()
	defer client.Close()

	var all []bench.Comparison
	if d.Producer {
		prod, err := d.producer(ctx, server, creds, client)
		if err != nil {
			return err
		}
		all = append(all, prod)
	}
	cons, err := bench.RunConsumer(ctx, bench.ConsumerConfig{Coordinator: server, Credentials: creds, Redis: client, Shards: d.Shards,
		Records: d.Records, Workers: d.Workers, Batch: d.Batch, Rounds: d.Rounds, RedisCPU: redisCPU})
	if err != nil {
		return fmt.Errorf("dataplane consumer: %w", err)
	}
	all = append(all, cons...)
	if d.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	fmt.Fprintf(out, "dataplane: %d records per phase, %d rounds, %d shards, batch %d, %d workers\n", d.Records, d.Rounds, d.Shards, d.Batch, d.Workers)
	for _, c := range all {
		fmt.Fprintf(out, "  %s\n    subject  %9.0f records/s\n    baseline %9.0f records/s\n    ratio    %.2f× (rates summed over rounds)\n",
			c.Name, c.Subject.PerSecond, c.Baseline.PerSecond, c.Ratio)
		if len(c.RoundRatios) == 0 {
			fmt.Fprintf(out, "    target ≥ %.2f×: %s\n", c.Target, verdict(c.Ratio >= c.Target))
			continue
		}
		fmt.Fprintf(out, "    rounds   %s\n    median   %.2f× (spread %.2f×–%.2f×; fastest phases %.2f×)   target ≥ %.2f×: %s\n",
			ratioList(c.RoundRatios), c.MedianRatio, c.MinRatio, c.MaxRatio, c.BestRatio, c.Target, verdict(c.MedianRatio >= c.Target))
		if c.SubjectCPU.Process > 0 {
			fmt.Fprintf(out, "    CPU/record  process %v (baseline %v)", c.SubjectCPU.Process, c.BaselineCPU.Process)
			if c.SubjectCPU.Redis > 0 {
				fmt.Fprintf(out, ", redis-server %v (baseline %v)", c.SubjectCPU.Redis, c.BaselineCPU.Redis)
			}
			fmt.Fprintln(out)
		}
	}
	return nil
}

// producer runs bench.RunProducer on a stream of its own.
func (d *DataplaneCmd) producer(ctx context.Context, server string, creds coordclient.Credentials, client redis.UniversalClient) (bench.Comparison, error) {
	const stream = "bench-producer"
	shards := d.Shards
	wire, err := bench.NewClient(server, creds)
	if err != nil {
		return bench.Comparison{}, err
	}
	err = bench.CreateStream(ctx, wire, stream, shards)
	wire.CloseIdleConnections()
	if err != nil {
		return bench.Comparison{}, err
	}
	if err := redistest.CreateShards(ctx, client, stream, shards, stream); err != nil {
		return bench.Comparison{}, fmt.Errorf("dataplane: %w", err)
	}
	prod, err := bench.RunProducer(ctx, bench.DataplaneConfig{Coordinator: server, Credentials: creds, Redis: client, Stream: stream,
		Shards: shards, Records: d.Records, Batch: d.Batch, Conns: d.Conns, Rounds: d.Rounds})
	if err != nil {
		return prod, fmt.Errorf("dataplane producer: %w", err)
	}
	prod.Target = targetDataplaneRatio
	return prod, nil
}

// redis connects to --redis, or starts a redis-server of its own, whose
// CPU time it then reads (nil otherwise).
func (d *DataplaneCmd) redis(ctx context.Context) (redis.UniversalClient, func() (time.Duration, error), func(), error) {
	if d.Redis != "" {
		addrs := strings.Split(d.Redis, ",")
		if len(addrs) > 1 {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}), nil, func() {}, nil
		}
		return redis.NewClient(&redis.Options{Addr: addrs[0]}), nil, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "rscoord-bench-redis-")
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := redistest.StartServer(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("dataplane: start redis-server: %w", err)
	}
	stop := func() {
		srv.Stop()
		os.RemoveAll(dir)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	var cpu func() (time.Duration, error)
	if pid, err := redisPID(ctx, client); err == nil {
		cpu = bench.ProcessCPU(pid)
	}
	return client, cpu, stop, nil
}

// redisPID is the process id a Redis server reports (INFO server).
func redisPID(ctx context.Context, client redis.UniversalClient) (int, error) {
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// ratioList formats ratios as "1.02× 0.97× …".
func ratioList(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f×", r)
	}
	return strings.Join(parts, " ")
}
