package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
)

// ConsumerConfig sizes a consumer comparison.
type ConsumerConfig struct {
	Coordinator string
	// Credentials authenticate every call; the zero value sends none.
	Credentials coordclient.Credentials
	Redis       redis.UniversalClient
	// Shards per stream; each phase and round reads a fresh stream.
	Shards int
	// Records per phase and round, spread evenly over the shards.
	Records int
	// Workers is the member's runtimeMaxConcurrency and the raw loop's
	// goroutine count.
	Workers int
	// Batch is the XREADGROUP COUNT of both.
	Batch int
	// Rounds alternates the phases this many times.
	Rounds int
}

// RunConsumer compares the member runtime (one member, Workers workers, a
// handler that only Acks) with a raw loop of XREADGROUP and one XACK per
// record on the same Redis, both draining a pre-filled stream.
func RunConsumer(ctx context.Context, cfg ConsumerConfig) (Comparison, error) {
	cmp := Comparison{Name: "member runtime vs raw XREADGROUP+XACK"}
	hc, err := newClient(cfg.Coordinator, cfg.Credentials, 4)
	if err != nil {
		return cmp, err
	}
	defer hc.CloseIdleConnections()
	for round := range cfg.Rounds {
		phases := []struct {
			name string
			rate *Rate
			run  func(context.Context, ConsumerConfig, string) (time.Duration, error)
		}{{"raw", &cmp.Baseline, consumeRaw}, {"member", &cmp.Subject, consumeMember}}
		if round%2 == 1 {
			phases[0], phases[1] = phases[1], phases[0]
		}
		for _, ph := range phases {
			prefix := fmt.Sprintf("bench-%s-%d", ph.name, round)
			if err := fill(ctx, hc, cfg, prefix); err != nil {
				return cmp, err
			}
			d, err := ph.run(ctx, cfg, prefix)
			if err != nil {
				return cmp, fmt.Errorf("%s phase: %w", ph.name, err)
			}
			ph.rate.add(cfg.Records, d)
		}
	}
	if cmp.Baseline.PerSecond > 0 {
		cmp.Ratio = cmp.Subject.PerSecond / cmp.Baseline.PerSecond
	}
	return cmp, nil
}

// fill creates the stream on the coordinator, its shard keys and consumer
// group in Redis, and writes the records.
func fill(ctx context.Context, hc *coordclient.Client, cfg ConsumerConfig, prefix string) error {
	if err := CreateStream(ctx, hc, prefix, cfg.Shards); err != nil {
		return err
	}
	payload := strings.Repeat("x", 64)
	pipe := cfg.Redis.Pipeline()
	for i := range cfg.Shards {
		pipe.XGroupCreateMkStream(ctx, protocol.StreamKey(prefix, i), prefix, "0")
	}
	for i := range cfg.Records {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: protocol.StreamKey(prefix, i%cfg.Shards), Values: []any{"n", i, "payload", payload}})
		if pipe.Len() >= 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("fill %s: %w", prefix, err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("fill %s: %w", prefix, err)
	}
	return nil
}

// consumeRaw drains the stream with Workers goroutines, each owning every
// Workers-th shard, reading with XREADGROUP and acknowledging each record
// with its own XACK, as a hand-written consumer would.
func consumeRaw(ctx context.Context, cfg ConsumerConfig, prefix string) (time.Duration, error) {
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	start := time.Now()
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var keys []string
			for s := w; s < cfg.Shards; s += cfg.Workers {
				keys = append(keys, protocol.StreamKey(prefix, s))
			}
			for acked.Load() < int64(cfg.Records) && len(keys) > 0 {
				idle := 0
				for _, key := range keys {
					res, err := cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{
						Group: prefix, Consumer: "raw", Streams: []string{key, ">"}, Count: int64(cfg.Batch), Block: -1,
					}).Result()
					if err == redis.Nil || (err == nil && len(res) == 0) {
						idle++
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					for _, m := range res[0].Messages {
						if err := cfg.Redis.XAck(ctx, key, prefix, m.ID).Err(); err != nil {
							errs <- err
							return
						}
						acked.Add(1)
					}
				}
				if idle == len(keys) {
					return // this worker's shards are drained
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return d, err
	}
	if n := acked.Load(); n != int64(cfg.Records) {
		return d, fmt.Errorf("raw loop acked %d of %d records", n, cfg.Records)
	}
	return d, nil
}

// consumeMember drains the stream with one member of the runtime whose
// handler only acknowledges, from Run until the last Ack.
func consumeMember(ctx context.Context, cfg ConsumerConfig, prefix string) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var acked atomic.Int64
	done := make(chan struct{})
	rt, err := member.New(func(ctx context.Context, msg *member.Message) error {
		if err := msg.Ack(ctx); err != nil {
			return err
		}
		if acked.Add(1) == int64(cfg.Records) {
			close(done)
		}
		return nil
	}, member.WithCoordinator(cfg.Coordinator), member.WithStream(prefix), member.WithRedis(cfg.Redis),
		member.WithBaseID("bench"), member.WithMaxWorkers(cfg.Workers), member.WithBatch(cfg.Batch),
		member.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), memberAuth(cfg.Credentials))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- rt.Run(ctx) }()
	select {
	case <-done:
	case err := <-runErr:
		return time.Since(start), fmt.Errorf("member stopped early: %w", err)
	case <-time.After(5 * time.Minute):
		cancel()
		<-runErr
		return time.Since(start), fmt.Errorf("member acked %d of %d records in 5 minutes", acked.Load(), cfg.Records)
	}
	d := time.Since(start)
	cancel()
	if err := <-runErr; err != nil && ctx.Err() == nil {
		return d, err
	}
	return d, nil
}
