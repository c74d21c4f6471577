package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/redisconn"
)

// summary is the outcome of a run.
type summary struct {
	published   int
	failed      int
	interrupted bool // a signal stopped the run before --count records
	elapsed     time.Duration
}

// publish runs the pod: start the producer, publish --count records, and
// shut down in order:
//
//  1. stop taking new records when ctx ends (SIGINT/SIGTERM); a publish in
//     flight finishes, so every record in Redis that this run knows about is
//     in the log;
//  2. close the producer (its routing refresher);
//  3. close the Redis client;
//  4. flush, sync and close the published log.
func publish(ctx context.Context, cli *CLI, log *slog.Logger) (sum summary, err error) {
	began := time.Now()
	defer func() { sum.elapsed = time.Since(began).Round(time.Millisecond) }()

	plog, err := openPublishedLog(cli.PublishedLog)
	if err != nil {
		return sum, err
	}
	defer func() { err = errors.Join(err, plog.Close()) }() // step 4

	nat, err := redisconn.ParseNATMap(cli.RedisNATMap)
	if err != nil {
		return sum, fmt.Errorf("--redis-nat-map: %w", err)
	}
	rdb, err := redisconn.Open(cli.Redis, redisconn.Config{
		Username: cli.RedisUsername, Password: os.Getenv("RSCOORD_REDIS_PASSWORD"), CAFile: cli.RedisCAFile, NATMap: nat,
	})
	if err != nil {
		return sum, fmt.Errorf("--redis: %w", err)
	}
	defer rdb.Close() // step 3

	opts := []producer.Opt{
		producer.WithCoordinator(cli.Coordinator),
		producer.WithStream(cli.Stream),
		producer.WithRedis(rdb),
		producer.WithRefreshInterval(cli.RefreshInterval),
		producer.WithRoutingLease(cli.RoutingLease),
		producer.WithMaxLen(cli.MaxLen),
		producer.WithLogger(log),
	}
	if cli.Group != "" {
		opts = append(opts, producer.WithGroup(cli.Group))
	}
	if cli.User != "" {
		opts = append(opts, producer.WithBasicAuth(cli.User, cli.Password))
	}
	if cli.Token != "" {
		opts = append(opts, producer.WithBearerToken(cli.Token))
	}
	p, err := producer.New(opts...)
	if err != nil {
		return sum, err
	}
	defer p.Close() // step 2

	if err := startWithRetry(ctx, p, cli.RetryTimeout, log); err != nil {
		// A signal during the start stops the run before any record, as
		// one during publishing does: the summary says so.
		sum.interrupted = ctx.Err() != nil
		return sum, err
	}
	r, _ := p.Routing()
	log.Info("publishing", "stream", cli.Stream, "shards", r.ShardCount, "count", cli.Count,
		"rate", cli.Rate, "batch", cli.Batch, "redis", cli.Redis)

	// Publishing itself is not cancelled by the signal (step 1): only the
	// loop and the retry waits are.
	pubCtx := context.WithoutCancel(ctx)
	pace := pacer{rate: cli.Rate, start: time.Now()}
	for seq := 0; seq < cli.Count; seq += cli.Batch {
		if !pace.wait(ctx, seq) {
			sum.interrupted = true
			break
		}
		n := min(cli.Batch, cli.Count-seq)
		recs := make([]producer.Record, n)
		for i := range recs {
			recs[i] = cli.record(seq + i)
		}
		var results []producer.Result
		if cli.Batch == 1 {
			results = []producer.Result{publishOne(ctx, pubCtx, p, recs[0], cli.RetryTimeout, log)}
		} else {
			results = publishBatch(ctx, pubCtx, p, recs, cli.RetryTimeout, log)
		}
		for i, res := range results {
			if res.Err != nil && ctx.Err() != nil {
				// Stopped by the signal while retrying: not published,
				// and not a failure either.
				sum.interrupted = true
				continue
			}
			if res.Err != nil {
				sum.failed++
				log.Error("record failed", "eventId", eventID(recs[i]), "err", res.Err)
				continue
			}
			sum.published++
			if err := plog.Write(publishedLine{
				EventID: eventID(recs[i]), PartitionKey: recs[i].PartitionKey,
				StreamKey: res.StreamKey, RecordID: res.ID,
			}); err != nil {
				return sum, err
			}
		}
		if ctx.Err() != nil {
			sum.interrupted = true
			break
		}
	}
	return sum, nil
}

// record is record number seq: a unique eventId, its partition key.
func (c *CLI) record(seq int) producer.Record {
	key := "key-" + strconv.Itoa(seq%c.KeySpace)
	return producer.Record{
		PartitionKey: key,
		Fields: []any{
			"eventId", c.Pod + "-" + strconv.Itoa(seq),
			"partitionKey", key,
			"seq", seq,
		},
	}
}

// eventID reads a record's eventId back from its fields.
func eventID(r producer.Record) string { return r.Fields.([]any)[1].(string) }

// startWithRetry starts the producer, retrying with backoff for up to
// timeout; an answer retrying cannot fix (4xx but 429: unknown stream,
// say) fails at once.
func startWithRetry(ctx context.Context, p *producer.Producer, timeout time.Duration, log *slog.Logger) error {
	err := retry(ctx, timeout, func() error {
		err := p.Start(ctx)
		var ce *producer.CoordinatorError
		if errors.As(err, &ce) && ce.StatusCode >= 400 && ce.StatusCode < 500 && ce.StatusCode != http.StatusTooManyRequests {
			return permanent{fmt.Errorf("%w: %w", errStartRefused, err)}
		}
		if err != nil {
			log.Warn("producer start failed; retrying", "err", err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("start producer: %w", err)
	}
	return nil
}

// publishOne publishes rec, retrying failures with backoff for up to
// timeout. The retry waits end with ctx; the publish itself runs on pubCtx.
func publishOne(ctx, pubCtx context.Context, p *producer.Producer, rec producer.Record, timeout time.Duration, log *slog.Logger) producer.Result {
	var res producer.Result
	err := retry(ctx, timeout, func() error {
		key, id, err := p.Publish(pubCtx, rec.PartitionKey, rec.Fields)
		res = producer.Result{StreamKey: key, ID: id, Err: err}
		if err != nil {
			log.Warn("publish failed; retrying", "eventId", eventID(rec), "err", err)
		}
		return classify(err)
	})
	res.Err = err
	return res
}

// publishBatch publishes recs in one PublishBatch and retries the records
// that failed, in their order, with backoff for up to timeout.
func publishBatch(ctx, pubCtx context.Context, p *producer.Producer, recs []producer.Record, timeout time.Duration, log *slog.Logger) []producer.Result {
	results := make([]producer.Result, len(recs))
	todo := make([]int, len(recs))
	for i := range todo {
		todo[i] = i
	}
	err := retry(ctx, timeout, func() error {
		batch := make([]producer.Record, len(todo))
		for j, i := range todo {
			batch[j] = recs[i]
		}
		var failed []int
		var errs []error
		for j, res := range p.PublishBatch(pubCtx, batch) {
			i := todo[j]
			results[i] = res
			if res.Err != nil {
				failed = append(failed, i)
				errs = append(errs, classify(res.Err))
			}
		}
		todo = failed
		if len(failed) == 0 {
			return nil
		}
		log.Warn("batch records failed; retrying", "failed", len(failed), "of", len(batch), "firstErr", errs[0])
		for _, e := range errs {
			var perm permanent
			if !errors.As(e, &perm) {
				return errs[0] // something worth retrying
			}
		}
		return permanent{errs[0]}
	})
	if err != nil {
		for _, i := range todo {
			if results[i].Err == nil {
				results[i].Err = err
			}
		}
	}
	return results
}

// classify marks errors retrying cannot fix.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, producer.ErrInvalidFields) || errors.Is(err, producer.ErrClosed) || errors.Is(err, producer.ErrNotStarted) {
		return permanent{err}
	}
	return err
}

// permanent wraps an error that must not be retried.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Backoff bounds of retry.
const (
	firstBackoff = 50 * time.Millisecond
	maxBackoff   = 2 * time.Second
)

// retry calls f until it succeeds, returns a permanent error, timeout has
// passed since the first call, or ctx ends; it waits 50 ms, 100 ms, … up to
// 2 s between calls and returns the last error.
func retry(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	wait := firstBackoff
	for {
		err := f()
		if err == nil {
			return nil
		}
		var perm permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("gave up after %s: %w", timeout, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("interrupted: %w", err)
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}

// pacer spaces records at rate per second from start; rate 0 means no wait.
type pacer struct {
	rate  float64
	start time.Time
}

// wait sleeps until record seq is due; false if ctx ended first.
func (p pacer) wait(ctx context.Context, seq int) bool {
	if ctx.Err() != nil {
		return false
	}
	if p.rate <= 0 {
		return true
	}
	due := p.start.Add(time.Duration(float64(seq) / p.rate * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
