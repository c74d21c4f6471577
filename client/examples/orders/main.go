// Command orders is an example application of the client module: a
// consumer that adds up order quantities per customer in a Redis hash,
// with a batch handler, hooks and retry in place, and a producer of
// orders as JSON payloads.
//
//	orders -mode produce -n 100 -coordinator http://127.0.0.1:8080 -redis 127.0.0.1:6379
//	orders -mode consume -expect 100 …
//
// Its unit tests (orders_test.go) use only the public test kit,
// client/member/membertest.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/redisconn"
)

func main() {
	mode := flag.String("mode", "consume", "consume or produce")
	coord := flag.String("coordinator", "http://127.0.0.1:8080", "coordinator base URL")
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	stream := flag.String("stream", "orders", "stream prefix")
	n := flag.Int("n", 100, "produce: orders to publish")
	expect := flag.Int64("expect", 0, "consume: stop once this many orders are counted (0: until SIGTERM)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	redis.SetLogger(redisconn.NewLogger(log)) // go-redis's own lines too (one logger per process)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()

	var err error
	switch *mode {
	case "produce":
		err = produce(ctx, rdb, *coord, *stream, *n)
	case "consume":
		err = consume(ctx, log, rdb, *coord, *stream, *expect)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		log.Error("orders", "err", err)
		os.Exit(1)
	}
}

func produce(ctx context.Context, rdb redis.UniversalClient, coord, stream string, n int) error {
	p, err := producer.New(producer.WithCoordinator(coord), producer.WithStream(stream), producer.WithRedis(rdb))
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.Start(ctx); err != nil {
		return err
	}
	return publishOrders(ctx, p, n)
}

// publishOrders publishes n orders of 5 customers; it takes the small
// producer.Publisher interface, so a fake can stand in for a Producer.
func publishOrders(ctx context.Context, p producer.Publisher, n int) error {
	for i := range n {
		o := Order{ID: fmt.Sprintf("o-%d", i), Customer: fmt.Sprintf("c-%d", i%5), Qty: 1 + i%3}
		if _, _, err := p.Publish(ctx, o.Customer, []string{member.PayloadField, o.json()}); err != nil {
			return fmt.Errorf("publish %s: %w", o.ID, err)
		}
	}
	return nil
}

func consume(ctx context.Context, log *slog.Logger, rdb redis.UniversalClient, coord, stream string, expect int64) error {
	store := &redisTotals{rdb: rdb, key: stream + ":totals"}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	app := &App{Store: store, Counted: func(total int64) {
		if expect > 0 && total >= expect {
			cancel()
		}
	}}
	rt, err := member.NewBatch(app.HandleBatch,
		member.WithCoordinator(coord), member.WithStream(stream), member.WithRedis(rdb),
		member.WithBatch(16),
		member.WithHandlerRetry(5, 20*time.Millisecond, time.Second),
		member.WithLogger(log),
		member.WithHooks(member.Hooks{
			OnAssigned: func(_ context.Context, c member.ShardChange) { log.Info("assigned", "shards", c.Shards) },
			OnRevoked: func(_ context.Context, c member.ShardChange) {
				log.Info("revoked", "shards", c.Shards, "reason", c.Reason)
			},
			OnHandlerError: func(_ context.Context, e *member.HandlerError) {
				log.Warn("handler failed", "records", len(e.Messages), "attempt", e.Attempt, "retry", e.Retry, "err", e.Err)
			},
		}))
	if err != nil {
		return err
	}
	return rt.Run(ctx)
}

// redisTotals keeps the totals in a Redis hash.
type redisTotals struct {
	rdb redis.UniversalClient
	key string
}

func (s *redisTotals) Add(ctx context.Context, deltas map[string]int64, orders int64) (int64, error) {
	pipe := s.rdb.TxPipeline()
	for c, d := range deltas {
		pipe.HIncrBy(ctx, s.key, c, d)
	}
	total := pipe.HIncrBy(ctx, s.key, "_orders", orders)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return total.Val(), nil
}
