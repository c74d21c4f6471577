package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/examples/tally"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
)

// startRaw drains the stream with Workers goroutines, each owning every
// Workers-th shard, reading with XREADGROUP and acknowledging what each
// read returned with one XACK, as a hand-written consumer would. A
// goroutine returns when a pass over its shards read nothing.
func startRaw(ctx context.Context, cfg ConsumerConfig, prefix string) (<-chan error, func() error, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rawWorker(ctx, cfg, prefix, w); err != nil {
				errs <- err
			}
		}()
	}
	done := make(chan error, 1)
	go func() { // ends with the workers
		wg.Wait()
		close(errs)
		done <- <-errs // nil when none failed
	}()
	stop := func() error {
		cancel()
		wg.Wait()
		return nil
	}
	return done, stop, nil
}

func rawWorker(ctx context.Context, cfg ConsumerConfig, prefix string, w int) error {
	var keys []string
	for s := w; s < cfg.Shards; s += cfg.Workers {
		keys = append(keys, protocol.StreamKey(prefix, s))
	}
	for len(keys) > 0 && ctx.Err() == nil {
		idle := 0
		for _, key := range keys {
			res, err := cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{
				Group: prefix, Consumer: "raw", Streams: []string{key, ">"}, Count: int64(cfg.Batch), Block: -1,
			}).Result()
			if errors.Is(err, redis.Nil) || (err == nil && len(res) == 0) {
				idle++
				continue
			}
			if err != nil {
				return err
			}
			msgs := res[0].Messages
			ids := make([]string, len(msgs))
			for i, m := range msgs {
				ids[i] = m.ID
			}
			if err := cfg.Redis.XAck(ctx, key, prefix, ids...).Err(); err != nil {
				return err
			}
		}
		if idle == len(keys) {
			return nil // this worker's shards are drained
		}
	}
	return nil
}

// startMember runs one member whose Handler only acknowledges each record.
func startMember(ctx context.Context, cfg ConsumerConfig, prefix string) (<-chan error, func() error, error) {
	rt, err := member.New(func(ctx context.Context, msg *member.Message) error {
		return msg.Ack(ctx)
	}, benchMemberOpts(cfg, prefix)...)
	if err != nil {
		return nil, nil, err
	}
	return runInBackground(ctx, rt.Run)
}

// startMemberBatch runs one member whose BatchHandler acknowledges each
// batch with AckAll.
func startMemberBatch(ctx context.Context, cfg ConsumerConfig, prefix string) (<-chan error, func() error, error) {
	rt, err := member.NewBatch(func(ctx context.Context, msgs []*member.Message) error {
		return member.AckAll(ctx, msgs)
	}, benchMemberOpts(cfg, prefix)...)
	if err != nil {
		return nil, nil, err
	}
	return runInBackground(ctx, rt.Run)
}

func benchMemberOpts(cfg ConsumerConfig, prefix string) []member.Opt {
	return []member.Opt{member.WithCoordinator(cfg.Coordinator), member.WithStream(prefix), member.WithRedis(cfg.Redis),
		member.WithBaseID("bench"), member.WithMaxWorkers(cfg.Workers), member.WithBatch(cfg.Batch),
		member.WithLogger(quietLog()), memberAuth(cfg.Credentials)}
}

// startService runs the tally example service (client/examples/tally) as
// it runs in its own command, with the runtime's defaults but for the
// workers; its logger drops lines, as the bench's members' do.
func startService(ctx context.Context, cfg ConsumerConfig, prefix string) (<-chan error, func() error, error) {
	svc, err := tally.New(tally.Config{
		Coordinator: []string{cfg.Coordinator}, Stream: prefix, Redis: cfg.Redis, Workers: cfg.Workers,
		Log: quietLog(), Auth: memberAuth(cfg.Credentials),
	})
	if err != nil {
		return nil, nil, err
	}
	return runInBackground(ctx, svc.Run)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runInBackground runs run until stop cancels its context; done yields
// its error should it return before.
func runInBackground(ctx context.Context, run func(context.Context) error) (<-chan error, func() error, error) {
	ctx, cancel := context.WithCancel(ctx)
	result := make(chan error, 1)
	go func() { result <- run(ctx) }() // ends with stop's cancel
	done := make(chan error, 1)
	var once sync.Once
	var runErr error
	wait := func() error {
		once.Do(func() { runErr = <-result })
		return runErr
	}
	go func() { // reports an early return; ends when run does
		err := wait()
		if ctx.Err() == nil {
			if err == nil {
				err = errors.New("stopped before draining")
			}
			done <- err
		}
	}()
	stop := func() error {
		cancel()
		if err := wait(); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	return done, stop, nil
}
