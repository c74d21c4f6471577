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

// RunConsumer compares the member runtime (one member, Workers workers)
// with a hand-written consumer on the same Redis: Workers goroutines each
// reading its share of the shards with XREADGROUP and acknowledging each
// read with one XACK of all its ids. Both subjects drain a pre-filled
// stream of the same records: a Handler that calls msg.Ack per record
// (acks coalesced by the runtime), and a BatchHandler that calls AckAll.
// It returns one comparison per subject, against the same baseline. The
// order of the phases rotates per round, so that a noisy neighbour hurts
// all alike.
func RunConsumer(ctx context.Context, cfg ConsumerConfig) ([]Comparison, error) {
	perRecord := Comparison{Name: "member Handler+msg.Ack vs raw XREADGROUP+batch XACK", Target: 0.8}
	batch := Comparison{Name: "member BatchHandler+AckAll vs raw XREADGROUP+batch XACK", Target: 0.95}
	var baseline Rate
	// rounds[i] are round i's rates: raw, Handler, BatchHandler.
	rounds := make([][3]float64, cfg.Rounds)
	hc, err := newClient(cfg.Coordinator, cfg.Credentials, 4)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	for round := range cfg.Rounds {
		phases := []struct {
			name string
			rate *Rate
			slot int
			run  func(context.Context, ConsumerConfig, string) (time.Duration, error)
		}{
			{"raw", &baseline, 0, consumeRaw},
			{"member", &perRecord.Subject, 1, consumeMember},
			{"batch", &batch.Subject, 2, consumeMemberBatch},
		}
		k := round % len(phases)
		phases = append(phases[k:], phases[:k]...)
		for _, ph := range phases {
			prefix := fmt.Sprintf("bench-%s-%d", ph.name, round)
			if err := fill(ctx, hc, cfg, prefix); err != nil {
				return nil, err
			}
			d, err := ph.run(ctx, cfg, prefix)
			if err != nil {
				return nil, fmt.Errorf("%s phase: %w", ph.name, err)
			}
			ph.rate.add(cfg.Records, d)
			rounds[round][ph.slot] = float64(cfg.Records) / d.Seconds()
		}
	}
	out := []Comparison{perRecord, batch}
	for i := range out {
		out[i].Baseline = baseline
		if baseline.PerSecond > 0 {
			out[i].Ratio = out[i].Subject.PerSecond / baseline.PerSecond
		}
		for _, r := range rounds {
			out[i].RoundRatios = append(out[i].RoundRatios, r[i+1]/r[0])
		}
		out[i].MedianRatio = median(out[i].RoundRatios)
	}
	return out, nil
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
// Workers-th shard, reading with XREADGROUP and acknowledging what each
// read returned with one XACK, as a hand-written consumer would.
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
					msgs := res[0].Messages
					ids := make([]string, len(msgs))
					for i, m := range msgs {
						ids[i] = m.ID
					}
					if err := cfg.Redis.XAck(ctx, key, prefix, ids...).Err(); err != nil {
						errs <- err
						return
					}
					acked.Add(int64(len(ids)))
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
// Handler only acknowledges each record.
func consumeMember(ctx context.Context, cfg ConsumerConfig, prefix string) (time.Duration, error) {
	return drainMember(ctx, cfg, prefix, func(opts []member.Opt, first func()) (*member.Runtime, error) {
		return member.New(func(ctx context.Context, msg *member.Message) error {
			first()
			return msg.Ack(ctx)
		}, opts...)
	})
}

// consumeMemberBatch drains the stream with one member whose BatchHandler
// acknowledges each batch with AckAll.
func consumeMemberBatch(ctx context.Context, cfg ConsumerConfig, prefix string) (time.Duration, error) {
	return drainMember(ctx, cfg, prefix, func(opts []member.Opt, first func()) (*member.Runtime, error) {
		return member.NewBatch(func(ctx context.Context, msgs []*member.Message) error {
			first()
			return member.AckAll(ctx, msgs)
		}, opts...)
	})
}

// drainMember runs one member until every record is acknowledged in Redis
// (the runtime's Acked counters, which count XACKs Redis answered, not Ack
// calls), timed from the first handler call to that point: the join and a
// new shard's recovery reads (its own pending entries, a claim, none of
// which find anything here) are the cost of an assignment, paid once per
// grant, not of the data plane; the raw loop's first read is timed, the
// member's is not, one round trip of a phase.
func drainMember(ctx context.Context, cfg ConsumerConfig, prefix string, newRuntime func([]member.Opt, func()) (*member.Runtime, error)) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var started atomic.Pointer[time.Time]
	rt, err := newRuntime([]member.Opt{member.WithCoordinator(cfg.Coordinator), member.WithStream(prefix), member.WithRedis(cfg.Redis),
		member.WithBaseID("bench"), member.WithMaxWorkers(cfg.Workers), member.WithBatch(cfg.Batch),
		member.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), memberAuth(cfg.Credentials)}, func() {
		if started.Load() == nil {
			now := time.Now()
			started.CompareAndSwap(nil, &now)
		}
	})
	if err != nil {
		return 0, err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- rt.Run(ctx) }()
	acked := func() int64 {
		n := int64(0)
		for _, s := range rt.Stats() {
			n += s.Acked
		}
		return n
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	limit := time.After(5 * time.Minute)
	for acked() < int64(cfg.Records) {
		select {
		case <-tick.C:
		case err := <-runErr:
			return 0, fmt.Errorf("member stopped early: %w", err)
		case <-limit:
			cancel()
			<-runErr
			return 0, fmt.Errorf("member acked %d of %d records in 5 minutes", acked(), cfg.Records)
		}
	}
	end := time.Now()
	cancel()
	if err := <-runErr; err != nil && ctx.Err() == nil {
		return 0, err
	}
	return end.Sub(*started.Load()), nil
}
