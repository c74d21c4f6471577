package member

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redisconn"
)

// Acknowledgements of a run queued for its member's ackFlusher
// (WithAckBatch), and the records it gives back when it stops.

// coalesce reports whether the run's acks go through the flusher.
func (r *shardRun) coalesce() bool { return r.core.flusher != nil && !r.core.cfg.syncAcks }

// queueAcks accepts the acknowledgement of msgs, all of this run: they are
// marked settled and queued for the flusher. It fails, queueing nothing,
// when the run may no longer acknowledge (its gate is closed or the lease
// is not valid), as a synchronous Ack does.
func (r *shardRun) queueAcks(msgs []*Message) error {
	if err := r.ackAllowed(); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed != nil {
		err := r.closed
		r.mu.Unlock()
		return err
	}
	first := len(r.acks) == 0
	n := 0
	for _, m := range msgs {
		if m.settled.CompareAndSwap(false, true) {
			r.acks = append(r.acks, m)
			n++
		}
	}
	now := len(r.acks) >= r.core.flusher.maxCount || r.stopping || r.inflight == 0
	r.mu.Unlock()
	// The flusher needs telling when the queue starts (it then sends it
	// within its delay) and when it must go now; acks in between join a
	// queue it already knows about.
	if n > 0 && (first || now) {
		r.core.flusher.queued(r, now)
	}
	return nil
}

// takeReadAcks hands the read loop the run's queued acks to send with its
// next read of new entries, in one round trip: only after a full read
// (more entries are likely there, so the read does not wait), while the
// run is neither stopping nor closed and the lease is valid, and not
// while reads fail. Otherwise it leaves them to the flusher.
func (r *shardRun) takeReadAcks(failing bool) []*Message {
	if r.core.flusher == nil || failing || !r.core.lease.valid() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fullRead || r.stopping || r.closed != nil || len(r.acks) == 0 {
		return nil
	}
	acks := r.acks
	r.acks = nil
	r.acksOut += len(acks)
	return acks
}

// setFullRead records whether the last read of new entries filled its
// COUNT (takeReadAcks).
func (r *shardRun) setFullRead(full bool) {
	r.mu.Lock()
	r.fullRead = full
	r.mu.Unlock()
}

// readGroupAcking sends acks (XACK) and the read in one pipeline on the
// run's read connection. The read does not block: its answer also carries
// the acks' outcome, which must not wait for new entries. The read is sent
// once, as readGroup's is; the XACK may be sent again, which is harmless.
func (r *shardRun) readGroupAcking(ctx context.Context, args *redis.XReadGroupArgs, acks []*Message) ([]redis.XStream, error) {
	args.Block = -1
	ids := make([]string, len(acks))
	for i, m := range acks {
		ids[i] = m.ID
	}
	var pipe redis.Pipeliner
	if r.conn != nil {
		conn, err := r.conn.get(ctx)
		if err != nil {
			r.acksSent(acks, nil, false)
			return nil, err
		}
		pipe = conn.Pipeline()
	} else {
		pipe = r.core.rdb.Pipeline()
	}
	ack := pipe.XAck(ctx, r.key, r.core.cfg.group, ids...)
	read := r.core.rdb.Pipeline().XReadGroup(ctx, args) // built, not sent
	_ = pipe.Process(ctx, redisconn.Once(read))
	_, _ = pipe.Exec(ctx) // each command carries its own error
	if err := ack.Err(); err != nil {
		r.core.log.Warn("could not acknowledge records; they stay pending and are redelivered",
			slog.String("streamKey", r.key), slog.Int("records", len(acks)), slog.String("firstId", acks[0].ID), slog.Any("error", err))
	}
	r.acksSent(acks, nil, ack.Err() == nil)
	res, err := read.Result()
	if err != nil && !errors.Is(err, redis.Nil) && r.conn != nil {
		r.conn.drop() // as sendOnce does: the next read gets a fresh connection
	}
	return res, err
}

// takeAcks hands the flusher the run's queued acks and records to give
// back, or drops them when the run may no longer acknowledge (leaseOK is
// the lease as the flusher read it for this flush).
func (r *shardRun) takeAcks(leaseOK bool) (acks []*Message, handback []string) {
	r.mu.Lock()
	if r.closed != nil || !leaseOK {
		// Refused, as a synchronous Ack would be now: the records stay
		// pending for the shard's owner.
		clear(r.acks)
		r.acks, r.handback = nil, nil
		notify := r.stopping && r.drainedLocked()
		r.mu.Unlock()
		if notify {
			r.core.notify(&runIdleMsg{run: r})
		}
		return nil, nil
	}
	acks, handback = r.acks, r.handback
	r.acks, r.handback = nil, nil
	r.acksOut += len(acks) + len(handback)
	r.mu.Unlock()
	return acks, handback
}

// acksSent records the outcome of one flush of the run: acks were
// acknowledged when ok (else they stay pending), and handback was sent.
func (r *shardRun) acksSent(acks []*Message, handback []string, ok bool) {
	r.mu.Lock()
	r.acksOut -= len(acks) + len(handback)
	if ok && len(acks) > 0 {
		r.pending -= int64(len(acks))
		r.ackedID = acks[len(acks)-1].ID
		r.updatedAt = time.Now()
		r.stats.acked.Add(int64(len(acks)))
	}
	notify := r.stopping && r.drainedLocked()
	r.mu.Unlock()
	if notify {
		r.core.notify(&runIdleMsg{run: r})
	}
}
