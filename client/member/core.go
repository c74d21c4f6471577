package member

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// memberCore is what the goroutines of one logical member share with its
// actor: settings, clients, the lease and the scheduler. Its fields are set
// before any of those goroutines starts and never change afterwards.
type memberCore struct {
	id      string
	cfg     *config
	handler Handler
	rdb     redis.UniversalClient
	acker   *acker
	log     *slog.Logger
	lease   *leaseClock
	sched   *scheduler
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

// handle runs the handler on one record; a worker calls it. Nothing is
// acknowledged here: an error or a panic leaves the record pending.
func (c *memberCore) handle(run *shardRun, msg *Message) {
	// Checked immediately before the handler runs: a record read under an
	// ownership that has since ended (fenced, lease lapsed, let go) is
	// never dispatched; it stays pending for the shard's owner.
	if err := run.ackAllowed(); err != nil {
		c.log.Debug("record not dispatched: ownership ended after it was read",
			slog.String("streamKey", msg.StreamKey), slog.String("id", msg.ID), slog.Any("reason", err))
		return
	}
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("handler panicked; the record stays pending",
				slog.String("streamKey", msg.StreamKey), slog.String("id", msg.ID), slog.Any("panic", p))
		}
	}()
	if err := c.handler(run.handlerCtx, msg); err != nil {
		c.log.Warn("handler failed; the record stays pending",
			slog.String("streamKey", msg.StreamKey), slog.String("id", msg.ID), slog.Any("error", fmt.Errorf("handle: %w", err)))
	}
}
