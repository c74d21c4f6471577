package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/redis/go-redis/v9"
)

// memberCore is what the goroutines of one logical member share with its
// actor: settings, clients, the lease and the scheduler. Its fields are set
// before any of those goroutines starts and never change afterwards.
type memberCore struct {
	id      string
	cfg     *config
	handler Handler
	batch   BatchHandler // set instead of handler by NewBatch
	rdb     redis.UniversalClient
	acker   *acker
	// flusher sends coalesced acks and given-back records; nil only in
	// unit tests of a run, whose acks are then synchronous.
	flusher *ackFlusher
	// lastErrs are the last handler errors of records left pending, for
	// their dead-letter entries (WithDeadLetter).
	lastErrs lastErrors
	log      *slog.Logger
	lease    *leaseClock
	sched    *scheduler
	hooks    *hooks
	stats    *statsBoard
	// send delivers a message to the member actor (system.Root.Send to
	// its PID); after the actor stopped, the message is dropped.
	send func(msg any)
	// ctx carries the member id; it is cancelled when the member actor
	// stops, which cancels every handler and read loop left.
	ctx    context.Context
	cancel context.CancelFunc
}

// notify sends msg to the member actor; after it stopped, msg is dropped.
func (c *memberCore) notify(msg any) { c.send(msg) }

// handle runs the handler on records of one shard (one, or a batch, in
// stream order); a worker calls it. Nothing is acknowledged here.
//
// Retry in place (doc.go rule 15): when the handler fails (an error or a
// panic), the records it left unsettled are handed to it again after a
// delay, on the same worker, while the shard's later records wait, so a
// transient failure does not reorder a key; after WithHandlerRetry's
// attempts they are left pending (a Nack). Retries stop at once when the
// run may no longer acknowledge (fenced, lease lapsed, drain deadline,
// Run ending).
func (c *memberCore) handle(run *shardRun, msgs []*Message) {
	defer run.stats.handled.Add(int64(len(msgs)))
	todo := c.overDelivered(run, msgs)
	if len(todo) == 0 {
		return
	}
	for attempt := 1; ; attempt++ {
		// Checked immediately before the handler runs: a record read
		// under an ownership that has since ended (fenced, lease lapsed,
		// let go) is never dispatched; it stays pending for the shard's
		// owner.
		hctx, cancel, err := run.dispatchContext()
		if err != nil {
			c.log.Debug("records not dispatched: ownership ended after they were read",
				slog.String("streamKey", run.key), slog.String("id", todo[0].ID), slog.Int("records", len(todo)),
				slog.Any("reason", err))
			return
		}
		for _, m := range todo {
			m.Attempt = attempt
		}
		err = c.call(hctx, todo)
		cancel()
		todo = unsettled(todo)
		if err == nil || len(todo) == 0 {
			return
		}
		run.stats.errors.Add(1)
		// A stopping run hands its records back rather than retry them:
		// its revocation waits for running handlers only (beginStop).
		retry := attempt < c.cfg.retryAttempts && run.handlerCtx.Err() == nil && !run.isStopping()
		he := &HandlerError{Messages: todo, Err: err, Attempt: attempt, Retry: retry}
		var hp *handlerPanic
		if errors.As(err, &hp) {
			he.Stack = hp.stack
			// A panic is a bug: logged here, once, with where it happened.
			c.log.Error("handler panicked", slog.String("streamKey", run.key), slog.String("id", todo[0].ID),
				slog.Int("records", len(todo)), slog.Int("attempt", attempt), slog.Bool("retry", retry),
				slog.Any("error", err), slog.String("stack", string(hp.stack)))
		}
		c.hooks.handlerError(run.handlerCtx, he)
		if !retry {
			if hp == nil {
				c.log.Warn("handler failed; the records stay pending",
					slog.String("streamKey", run.key), slog.String("id", todo[0].ID), slog.Int("records", len(todo)),
					slog.Int("attempts", attempt), slog.Any("error", err))
			}
			c.giveUp(run, todo, err)
			return
		}
		delay := retryDelay(c.cfg.retryDelay, c.cfg.retryMaxDelay, attempt)
		c.log.Debug("handler failed; retrying in place", slog.String("streamKey", run.key), slog.String("id", todo[0].ID),
			slog.Int("attempt", attempt), slog.Duration("delay", delay), slog.Any("error", err))
		run.stats.retries.Add(1)
		sleepOrStop(run.handlerCtx, run.stopped, delay)
		if run.isStopping() {
			c.giveUp(run, todo, err)
			return
		}
	}
}

// call runs the handler once, a panic turned into a *handlerPanic that
// keeps the panicking goroutine's stack.
func (c *memberCore) call(ctx context.Context, msgs []*Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &handlerPanic{err: panicError("handler", p), stack: debug.Stack()}
		}
	}()
	if c.batch != nil {
		err = c.batch(ctx, msgs)
	} else {
		err = c.handler(ctx, msgs[0])
	}
	if err != nil {
		return fmt.Errorf("handle: %w", err)
	}
	return nil
}

// panicError turns a recovered panic of what into an error; a panic with
// an error wraps it, so that errors.Is and errors.As see its cause.
func panicError(what string, p any) error {
	if err, ok := p.(error); ok {
		return fmt.Errorf("%s panicked: %w", what, err)
	}
	return fmt.Errorf("%s panicked: %v", what, p)
}

// handlerPanic is a recovered handler panic with its stack.
type handlerPanic struct {
	err   error
	stack []byte
}

func (p *handlerPanic) Error() string { return p.err.Error() }
func (p *handlerPanic) Unwrap() error { return p.err }

// unsettled are the records neither acknowledged nor Nacked.
func unsettled(msgs []*Message) []*Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if !m.settled.Load() && !m.nacked.Load() {
			out = append(out, m)
		}
	}
	return out
}

// retryDelay is the wait before attempt+1: base doubled per attempt, at
// most maxDelay, plus jitter.
func retryDelay(base, maxDelay time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	return jitter(min(d, maxDelay))
}
