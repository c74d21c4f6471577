package member

import "time"

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
	n := 0
	for _, m := range msgs {
		if m.settled.CompareAndSwap(false, true) {
			r.acks = append(r.acks, m)
			n++
		}
	}
	now := len(r.acks) >= r.core.flusher.maxCount || r.stopping || r.inflight == 0
	r.mu.Unlock()
	if n > 0 {
		r.core.flusher.queued(r, now)
	}
	return nil
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
