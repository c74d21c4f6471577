package member

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
)

// shardRun is one period during which a member reads one shard: from the
// start of its read loop until the member has let the shard go. A member
// has at most one live run per shard (the member actor enforces it), so a
// shard never has two read loops in one member.
//
// Who touches what:
//   - the shard actor starts and stops the read loop (readCancel, readDone);
//   - the read loop delivers batches (deliver) and waits on idle;
//   - workers take and finish records (take, finish) and ACK (ackAllowed,
//     acked);
//   - the member actor stops the run (beginStop, fence, closeGate), reads
//     its progress and in-flight count, and alone reads and writes the
//     fields marked "member actor only".
//
// Everything under mu may be touched by all of them.
type shardRun struct {
	core  *memberCore
	shard int
	key   string
	// ownerEpoch is the shard's ownership token when the run started (0
	// from a coordinator that sends none).
	ownerEpoch int64
	// stats are the member's counters of this shard (Runtime.Stats).
	stats *shardCounters

	// handlerCtx is the parent of every handler call's context
	// (dispatchContext); cancelled when the run is fenced,
	// and once it has ended.
	handlerCtx     context.Context
	cancelHandlers context.CancelFunc
	// idle receives a token when the last delivered batch is finished (or
	// dropped), so the read loop may read again.
	idle chan struct{}

	// Shard actor only.
	readCancel context.CancelFunc
	readDone   chan struct{}
	// conn is the read loop's connection for blocking reads, nil when the
	// client cannot give one (newReadConn). Set by the shard actor before
	// the loop starts; see readConn for who touches what.
	conn *readConn

	// Member actor only.
	pid        *actor.PID
	terminated bool // the shard actor stopped: its read loop has returned
	stopSent   bool // the shard actor was told to stop
	drainTimer *time.Timer
	drainAt    time.Duration // deadline drainTimer was set for, on the lease clock

	mu sync.Mutex
	// queue holds read records not yet handed to a worker.
	queue []*Message
	// inflight counts records read and not finished: queued or being
	// handled. A run is drained when it is 0.
	inflight int
	// scheduled: the run is in the scheduler's queue or held by a worker.
	scheduled bool
	// closed, once set, stops dispatch and ACKs: ErrFenced,
	// ErrLeaseExpired or ErrRevoked.
	closed error
	// fenced: closed at once, without draining.
	fenced bool
	// stopping: the member asked the run to stop; it is told every time
	// the run becomes idle (a read that returns after the stop may add
	// work again; the member's settle is idempotent).
	stopping bool
	// acks are records whose Ack was accepted and not sent yet
	// (ackFlusher); acksOut counts those the flusher is sending now. A
	// stopping run is drained only once both are none, so that REVOKED
	// and the leave come after its acknowledgements reached Redis.
	acks    []*Message
	acksOut int
	// handback are ids of records read and never handed to a worker,
	// given back when the run stopped (beginStop); the flusher marks them
	// long idle (XCLAIM … IDLE) so that the shard's next owner claims
	// them first thing, before new entries, instead of a claim min idle
	// later. A stopping run is drained only once they were sent.
	handback []string
	// fullRead: the last read of new entries filled its COUNT, so the
	// next one will likely find entries at once and may carry the
	// batch's acks (takeReadAcks).
	fullRead bool
	// stopped is closed when the run starts to stop (gracefully or
	// fenced): retries in place waiting for their delay end at once.
	stopped   chan struct{}
	delivered string
	ackedID   string
	pending   int64
	updatedAt time.Time
}

func newShardRun(core *memberCore, shard int, ownerEpoch int64) *shardRun {
	hctx, cancel := context.WithCancel(core.ctx)
	return &shardRun{
		core:           core,
		shard:          shard,
		ownerEpoch:     ownerEpoch,
		key:            protocol.StreamKey(core.cfg.stream, shard),
		stats:          core.stats.counters(core.id, shard),
		handlerCtx:     hctx,
		cancelHandlers: cancel,
		idle:           make(chan struct{}, 1),
		stopped:        make(chan struct{}),
	}
}

// deliver hands a batch read from Redis to the workers. It reports false
// when the run is closed or stopping: the batch is dropped and stays
// pending in Redis for the shard's next owner.
func (r *shardRun) deliver(batch []*Message) bool {
	r.mu.Lock()
	if r.closed != nil || r.stopping {
		back := r.closed == nil && r.core.flusher != nil
		if back {
			r.handBackLocked(batch)
		}
		r.mu.Unlock()
		if back {
			r.core.flusher.queued(r, true)
		}
		return false
	}
	r.queue = append(r.queue, batch...)
	r.inflight += len(batch)
	r.pending += int64(len(batch))
	r.delivered = batch[len(batch)-1].ID
	r.updatedAt = time.Now()
	r.stats.inFlight.Add(int64(len(batch)))
	r.stats.read(r.delivered)
	push := !r.scheduled
	r.scheduled = true
	r.mu.Unlock()
	if push {
		r.core.sched.push(r)
	}
	return true
}

// take gives a worker the next n records in order (all queued ones when
// n < 1), or nil when there is none (the run was closed and its queue
// dropped); the run is then no longer scheduled.
func (r *shardRun) take(n int) []*Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		r.scheduled = false
		return nil
	}
	if n < 1 || n > len(r.queue) {
		n = len(r.queue)
	}
	out := slices.Clone(r.queue[:n])
	clear(r.queue[:n])
	r.queue = r.queue[n:]
	return out
}

// finish records that a worker is done with n records and reports
// whether the run has more to hand out (the worker then puts it back at
// the tail of the scheduler's queue).
func (r *shardRun) finish(n int) (more bool) {
	r.mu.Lock()
	r.inflight -= n
	r.stats.inFlight.Add(-int64(n))
	more = len(r.queue) > 0
	if !more {
		r.scheduled = false
	}
	notify := r.idleLocked()
	// The read batch is done: its acks need not wait for the flusher's
	// delay. After a full read the read loop, which reads again now,
	// sends them with that read; else the flusher sends them at once.
	flush := r.inflight == 0 && len(r.acks) > 0 && (!r.fullRead || r.stopping)
	r.mu.Unlock()
	if flush {
		r.core.flusher.queued(r, true)
	}
	if notify {
		r.core.notify(&runIdleMsg{run: r})
	}
	return more
}

// idleLocked signals the read loop when the run has nothing in flight, and
// reports whether the member must be told (the run is stopping and
// drained).
func (r *shardRun) idleLocked() (notifyMember bool) {
	if r.inflight != 0 {
		return false
	}
	select {
	case r.idle <- struct{}{}:
	default:
	}
	return r.stopping && r.drainedLocked()
}

// beginStop marks the run as stopping (graceful): records being handled
// finish and may be acknowledged, while records read and not handed to a
// worker yet are handed back at once (dropped here, they stay pending in
// Redis for the shard's next owner), so that a revocation waits for the
// running handlers only. The member stops the shard actor, which stops the
// read loop.
func (r *shardRun) beginStop() {
	r.mu.Lock()
	r.stopping = true
	r.closeStoppedLocked()
	dropped := len(r.queue)
	r.handBackLocked(r.queue)
	clear(r.queue)
	r.queue = nil
	r.inflight -= dropped
	r.stats.inFlight.Add(-int64(dropped))
	notify := r.idleLocked()
	flush := len(r.acks) > 0 || len(r.handback) > 0
	r.mu.Unlock()
	if flush {
		r.core.flusher.queued(r, true)
	}
	if notify {
		r.core.notify(&runIdleMsg{run: r})
	}
}

// handBackLocked queues msgs to be given back (see handback).
func (r *shardRun) handBackLocked(msgs []*Message) {
	if r.core.flusher == nil {
		return // no flusher (unit tests of the run): they stay pending as they are
	}
	for _, m := range msgs {
		r.handback = append(r.handback, m.ID)
	}
}

// closeStoppedLocked closes the stopped channel once.
func (r *shardRun) closeStoppedLocked() {
	select {
	case <-r.stopped:
	default:
		close(r.stopped)
	}
}

// isStopping reports whether the run was asked to stop.
func (r *shardRun) isStopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

// fence stops dispatch and ACKs at once: queued records are dropped (they
// stay pending in Redis), every later Ack fails with err, and handlers'
// contexts are cancelled. Records being handled still count as in flight
// until their handlers return, but can no longer be acknowledged.
func (r *shardRun) fence(err error) {
	r.mu.Lock()
	if r.closed == nil {
		r.closed = err
	}
	r.fenced = true
	r.stopping = true
	r.closeStoppedLocked()
	// Acks accepted and not sent are refused now: their records stay
	// pending, as a synchronous Ack would have failed.
	clear(r.acks)
	r.acks = nil
	r.handback = nil
	dropped := len(r.queue)
	clear(r.queue)
	r.queue = nil
	r.inflight -= dropped
	r.stats.inFlight.Add(-int64(dropped))
	if r.inflight == 0 {
		select {
		case r.idle <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
	r.cancelHandlers()
}

// closeGate makes every later Ack fail with err, once the run has been let
// go; unlike fence it does not cancel anything.
func (r *shardRun) closeGate(err error) {
	r.mu.Lock()
	if r.closed == nil {
		r.closed = err
	}
	r.mu.Unlock()
}

// drained reports whether nothing of the run is left in flight and none
// of its acks waits to be sent, or the run was fenced (whose handlers are
// no longer waited for).
func (r *shardRun) drained() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drainedLocked()
}

func (r *shardRun) drainedLocked() bool {
	return r.fenced || (r.inflight == 0 && len(r.acks) == 0 && len(r.handback) == 0 && r.acksOut == 0)
}

func (r *shardRun) inFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.inflight, 0)
}

// isClosed reports whether the run's gate is closed.
func (r *shardRun) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed != nil
}

// ackAllowed says whether a record of this run may be acknowledged now.
func (r *shardRun) ackAllowed() error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed != nil {
		return closed
	}
	if !r.core.lease.valid() {
		return ErrLeaseExpired
	}
	return nil
}

// dispatchContext is the context of one handler call, or why the run may
// no longer hand records out. With WithHandlerDeadline(true) its deadline
// is the lease end as known now: a renewal later cannot move a context's
// deadline, so a handler that plans by ctx.Deadline() never plans past
// the time up to which this member may be sure it still owns the shard.
// It is also cancelled whenever handlerCtx is (fenced, lease lapsed,
// drain deadline, Run ending). The lease is read once, for both the check
// and the deadline.
func (r *shardRun) dispatchContext() (context.Context, context.CancelFunc, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed != nil {
		return nil, nil, closed
	}
	left := r.core.lease.until()
	if left <= 0 {
		return nil, nil, ErrLeaseExpired
	}
	if !r.core.cfg.handlerDeadline {
		return r.handlerCtx, func() {}, nil
	}
	ctx, cancel := context.WithDeadline(r.handlerCtx, time.Now().Add(left))
	return ctx, cancel, nil
}

// acked records a successful Ack or AckDel of m.
func (r *shardRun) acked(m *Message) {
	if !m.settled.CompareAndSwap(false, true) {
		return
	}
	r.stats.acked.Add(1)
	r.mu.Lock()
	r.pending--
	r.ackedID = m.ID
	r.updatedAt = time.Now()
	r.mu.Unlock()
}

// progress is the run's consumption progress for a heartbeat. pendingCount
// is what this member read on this run and has not acknowledged (queued,
// being handled, or left pending by a Nack or an error), not a Redis
// XPENDING count.
func (r *shardRun) progress() protocol.ShardProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := protocol.ShardProgress{
		Shard:           protocol.Shard{ShardIndex: r.shard},
		StreamKey:       r.key,
		LastDeliveredID: r.delivered,
		LastAckedID:     r.ackedID,
		PendingCount:    max(r.pending, 0),
		UpdatedAt:       r.updatedAt,
	}
	if p.LastDeliveredID == "" {
		p.LastDeliveredID = "0-0"
	}
	if p.LastAckedID == "" {
		p.LastAckedID = "0-0"
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = time.Now()
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	return p
}

// shardActor is the child actor of a member actor for one shard run. It
// owns the run's read loop: started with the actor, stopped (and waited
// for) when the actor stops or restarts. Its termination tells the member
// actor that the read loop has returned.
type shardActor struct {
	run *shardRun
}

// Receive handles the actor's lifecycle; protoactor never calls it
// concurrently.
func (a *shardActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		a.startReading()
	case *actor.Stopping, *actor.Restarting:
		a.stopReading()
	}
}

func (a *shardActor) startReading() {
	r := a.run
	rctx, cancel := context.WithCancel(r.core.ctx)
	r.readCancel, r.readDone = cancel, make(chan struct{})
	r.conn = newReadConn(r.core.rdb, r.key)
	go r.readLoop(rctx, r.readDone) // owned by this actor; stopped in stopReading
}

// stopReading stops the read loop and waits for it. A blocking read in
// progress is interrupted (readConn.interruptUntil), so this takes a few
// round trips; without a read connection (newReadConn) it is not (go-redis
// does not abort a read on cancel) and this takes up to the block time.
// Records a read returns after the stop are handled when the run is
// stopping gracefully and dropped (left pending) when it was fenced.
func (a *shardActor) stopReading() {
	r := a.run
	if r.readCancel == nil {
		return
	}
	r.readCancel()
	if r.conn != nil {
		// Not r.core.ctx: the member's shutdown cancels it before its shard
		// actors stop, and their reads are to be cut short then too.
		r.conn.interruptUntil(context.WithoutCancel(r.core.ctx), r.readDone)
	}
	<-r.readDone
	r.readCancel = nil
}
