package member

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ackFlusher sends one member's coalesced acknowledgements (WithAckBatch):
// Ack and AckAll queue their records on the record's run, and the flusher
// sends the queues of every run that has some as one pipeline of XACKs,
// one per shard. One flush is in flight at a time; acks queued meanwhile
// go with the next, so a busy member sends few large XACKs.
//
// A run's queue is sent at once when it holds maxCount records, when the
// run has nothing left in flight (its read batch is done, so nothing more
// comes soon) and when the run is stopping; otherwise at most delay after
// its first record was queued. Right before sending, the flusher checks
// the run's ACK gate and the lease, as a synchronous Ack does: a run
// fenced, let go or without a valid lease drops its queue, and its records
// stay pending for the shard's owner (doc.go rules 8 and 9).
//
// The member actor starts the flusher with its workers and stops it after
// them (stop waits for the flush in flight, which stop cancels).
type ackFlusher struct {
	rdb      redis.UniversalClient
	group    string
	log      *slog.Logger
	lease    *leaseClock
	maxCount int
	delay    time.Duration
	timeout  time.Duration

	mu    sync.Mutex
	dirty map[*shardRun]struct{} // runs with queued acks
	// urgent: a run asked for its queue to be sent now.
	urgent bool

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newAckFlusher(core *memberCore, maxCount int, delay, timeout time.Duration) *ackFlusher {
	ctx, cancel := context.WithCancel(context.WithoutCancel(core.ctx))
	return &ackFlusher{
		rdb: core.rdb, group: core.cfg.group, log: core.log, lease: core.lease,
		maxCount: maxCount, delay: delay, timeout: timeout,
		dirty: map[*shardRun]struct{}{}, wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
}

// start runs the flush loop; the member actor stops it with stop.
func (f *ackFlusher) start() { go f.loop() }

// stop cancels the flush in flight, if any, and waits for the loop to
// return. Acks still queued are not sent: stop runs after every run's ACK
// gate was closed, so they would be refused anyway.
func (f *ackFlusher) stop() {
	f.cancel()
	<-f.done
}

// queued tells the flusher that run has acks queued; now asks for them to
// be sent at once.
func (f *ackFlusher) queued(run *shardRun, now bool) {
	f.mu.Lock()
	f.dirty[run] = struct{}{}
	f.urgent = f.urgent || now
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *ackFlusher) loop() {
	defer close(f.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
		}
		// Wait up to delay for more acks, unless some run wants its queue
		// sent now; a wake in the meantime may be that run.
		timer.Reset(f.delay)
	gather:
		for !f.isUrgent() {
			select {
			case <-f.ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
				break gather
			case <-f.wake:
			}
		}
		timer.Stop()
		f.flush()
	}
}

func (f *ackFlusher) isUrgent() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.urgent
}

// flush sends every dirty run's queue, as one pipeline, and records the
// outcome on each run.
func (f *ackFlusher) flush() {
	f.mu.Lock()
	runs := make([]*shardRun, 0, len(f.dirty))
	for r := range f.dirty {
		runs = append(runs, r)
	}
	clear(f.dirty)
	f.urgent = false
	f.mu.Unlock()

	type batch struct {
		run      *shardRun
		msgs     []*Message
		handback []string
		ack      *redis.IntCmd
		back     *redis.Cmd
	}
	var batches []batch
	leaseOK := f.lease.valid()
	for _, r := range runs {
		if msgs, back := r.takeAcks(leaseOK); len(msgs) > 0 || len(back) > 0 {
			batches = append(batches, batch{run: r, msgs: msgs, handback: back})
		}
	}
	if len(batches) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(f.ctx, f.timeout)
	defer cancel()
	pipe := f.rdb.Pipeline()
	for i := range batches {
		b := &batches[i]
		if len(b.msgs) > 0 {
			ids := make([]string, len(b.msgs))
			for j, m := range b.msgs {
				ids[j] = m.ID
			}
			b.ack = pipe.XAck(ctx, b.run.key, f.group, ids...)
		}
		if len(b.handback) > 0 {
			// The entries stay this consumer's, but look idle for a long
			// time: the next owner's XAUTOCLAIM, which runs before its
			// reads of new entries, takes them at once and in order.
			// JUSTID leaves their delivery counts alone.
			args := []any{"XCLAIM", b.run.key, f.group, b.run.core.id, 0}
			for _, id := range b.handback {
				args = append(args, id)
			}
			args = append(args, "IDLE", handBackIdle.Milliseconds(), "JUSTID")
			b.back = pipe.Do(ctx, args...)
		}
	}
	// Exec's error is that of the first failed command; each command's own
	// is read below.
	_, _ = pipe.Exec(ctx)
	for _, b := range batches {
		ok := true
		if b.ack != nil {
			if err := b.ack.Err(); err != nil {
				ok = false
				f.log.Warn("could not acknowledge records; they stay pending and are redelivered",
					slog.String("streamKey", b.run.key), slog.Int("records", len(b.msgs)),
					slog.String("firstId", b.msgs[0].ID), slog.Any("error", err))
			}
		}
		if b.back != nil {
			if err := b.back.Err(); err != nil {
				f.log.Warn("could not give back records read and not handled; the next owner claims them after its claim min idle",
					slog.String("streamKey", b.run.key), slog.Int("records", len(b.handback)), slog.Any("error", err))
			} else {
				f.log.Debug("gave back records read and not handled", slog.String("streamKey", b.run.key),
					slog.Int("records", len(b.handback)))
			}
		}
		b.run.acksSent(b.msgs, b.handback, ok)
	}
}

// handBackIdle is the idle time given-back records are set to: longer
// than any sensible claim min idle, so that any next owner claims them.
const handBackIdle = 30 * 24 * time.Hour
