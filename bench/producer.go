package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
)

// RunProducer compares producer.PublishBatch with a raw go-redis pipeline
// of XADD NOMKSTREAM to the same keys, routed the same way.
func RunProducer(ctx context.Context, cfg DataplaneConfig) (Comparison, error) {
	p, err := producer.New(producer.WithCoordinator(cfg.Coordinator), producer.WithStream(cfg.Stream),
		producer.WithRedis(cfg.Redis), producerAuth(cfg.Credentials))
	if err != nil {
		return Comparison{}, err
	}
	if err := p.Start(ctx); err != nil {
		return Comparison{}, fmt.Errorf("producer bench: %w", err)
	}
	defer p.Close()
	cmp := Comparison{Name: "producer PublishBatch vs raw pipelined XADD"}
	for round := range cfg.Rounds {
		raw := func(batch []producer.Record) error {
			pipe := cfg.Redis.Pipeline()
			for _, rec := range batch {
				key := protocol.StreamKey(cfg.Stream, protocol.Route(rec.PartitionKey, cfg.Shards))
				pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, NoMkStream: true, Values: rec.Fields})
			}
			_, err := pipe.Exec(ctx)
			return err
		}
		ours := func(batch []producer.Record) error {
			for _, res := range p.PublishBatch(ctx, batch) {
				if res.Err != nil {
					return res.Err
				}
			}
			return nil
		}
		phases := []struct {
			rate *Rate
			do   func([]producer.Record) error
		}{{&cmp.Baseline, raw}, {&cmp.Subject, ours}}
		if round%2 == 1 {
			phases[0], phases[1] = phases[1], phases[0]
		}
		for _, ph := range phases {
			d, err := publishAll(ctx, cfg, round, ph.do)
			if err != nil {
				return cmp, err
			}
			ph.rate.add(cfg.Records, d)
		}
	}
	if cmp.Baseline.PerSecond > 0 {
		cmp.Ratio = cmp.Subject.PerSecond / cmp.Baseline.PerSecond
	}
	return cmp, nil
}

// publishAll publishes cfg.Records records in batches from cfg.Conns
// goroutines with do and returns the time taken.
func publishAll(ctx context.Context, cfg DataplaneConfig, round int, do func([]producer.Record) error) (time.Duration, error) {
	payload := strings.Repeat("x", 64)
	batches := make(chan []producer.Record, cfg.Conns)
	go func() {
		defer close(batches)
		for start := 0; start < cfg.Records; start += cfg.Batch {
			n := min(cfg.Batch, cfg.Records-start)
			batch := make([]producer.Record, n)
			for i := range batch {
				seq := strconv.Itoa(round) + "-" + strconv.Itoa(start+i)
				batch[i] = producer.Record{PartitionKey: "key-" + strconv.Itoa((start+i)%1000),
					Fields: []any{"eventId", seq, "payload", payload}}
			}
			select {
			case batches <- batch:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	begin := time.Now()
	for range cfg.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if err := do(b); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(begin)
	for range batches { // drain if a worker stopped early
	}
	if first != nil {
		return d, fmt.Errorf("publish: %w", first)
	}
	return d, nil
}
