package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// readPhase is where a shard's read loop is (docs/protocol.md §8, "on
// assignment"; doc.go rule 7): own pending entries first, then entries
// other consumers left idle, then new entries, claiming again every
// claim-min-idle.
type readPhase int

const (
	// phaseOwnPending reads this consumer's pending entries: XREADGROUP …
	// STREAMS key <cursor>, from "0" up, until one answer is empty.
	phaseOwnPending readPhase = iota
	// phaseClaim claims entries idle for at least the claim min idle:
	// XAUTOCLAIM from "0-0" until the cursor comes back "0-0".
	phaseClaim
	// phaseNew reads new entries: XREADGROUP … BLOCK … STREAMS key ">".
	phaseNew
)

func (p readPhase) String() string {
	switch p {
	case phaseOwnPending:
		return "own-pending"
	case phaseClaim:
		return "claim"
	default:
		return "new"
	}
}

// reader is the read position of one run; only its read loop uses it.
type reader struct {
	phase     readPhase
	cursor    string
	lastClaim time.Time
	// failing: the last read failed. Reads then do not block: go-redis
	// waits BLOCK plus 10s for a blocking read from a frozen server, but
	// only its read timeout for a plain one, so the failures that make
	// the member give its shards back (rule 14) come in seconds.
	failing bool
}

// Back-off bounds of a read loop after a Redis error.
const (
	readBackoffMin = 50 * time.Millisecond
	readBackoffMax = 2 * time.Second
	// leasePoll is how often a read loop looks at an expired lease
	// before the member actor stops it.
	leasePoll = 20 * time.Millisecond
)

// readLoop reads the shard until ctx is cancelled or the run is closed,
// one batch at a time: it reads, delivers the batch to the workers and
// waits until they have finished it. It closes done when it returns.
//
// Rule 9 of doc.go: no read is issued, and no record read is delivered,
// while the member's lease is not valid (fail closed); records read by a
// call that outlived the lease stay pending in Redis.
func (r *shardRun) readLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	if r.conn != nil {
		defer r.conn.drop() // before done: the run's connection ends with it
	}
	log := r.core.log.With(slog.Int("shard", r.shard), slog.String("streamKey", r.key))
	if !r.awaitIdle(ctx) {
		return
	}
	rd := &reader{phase: phaseOwnPending, cursor: "0"}
	backoff := time.Duration(0)
	failures := 0
	for ctx.Err() == nil {
		if r.isClosed() {
			return // fenced or let go: the shard actor is being stopped
		}
		if !r.core.lease.valid() {
			sleep(ctx, leasePoll)
			continue
		}
		batch, err := r.fetchSafe(ctx, rd)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			rd.failing = true
			if rd.phase != phaseOwnPending { // rule 7
				// Redis may have run a read or claim whose answer was
				// lost, moving entries into this consumer's pending list:
				// read those next, not a claim min idle later.
				rd.phase, rd.cursor = phaseOwnPending, "0"
			}
			if failures == r.core.cfg.redisFailureLimit {
				// Rule 14: the member gives its shards back.
				r.core.notify(&readFailedMsg{run: r, failures: failures, err: err})
			}
			backoff = min(max(backoff*2, readBackoffMin), readBackoffMax)
			if failures == 1 || failures%20 == 0 {
				log.Warn("read failed; retrying", slog.String("phase", rd.phase.String()),
					slog.Int("failures", failures), slog.Duration("backoff", backoff), slog.Any("error", err))
			}
			sleep(ctx, backoff)
			continue
		}
		if failures > 0 {
			log.Info("reads recovered", slog.Int("failures", failures))
		}
		failures, backoff, rd.failing = 0, 0, false
		if len(batch) == 0 {
			continue
		}
		if !r.core.lease.valid() || !r.deliver(batch) {
			continue // left pending; the loop ends at the next check
		}
		select {
		case <-r.idle:
		case <-ctx.Done():
			return
		}
	}
}

// awaitIdle waits until nothing of the run is in flight, and reports
// false when ctx ended first. A new run has nothing in flight; a shard
// actor restarted after a panic starts a new loop on the same run while
// records the loop before delivered are still queued or being handled
// (their handlers may ignore their context). They are still in this
// consumer's pending list, so reading it now (rule 7) would hand them out
// a second time, out of order. A token the loop before left unread is
// taken too, so that the first batch is not taken for finished.
func (r *shardRun) awaitIdle(ctx context.Context) bool {
	for r.inFlight() > 0 {
		select {
		case <-r.idle:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case <-r.idle:
	default:
	}
	return true
}

// fetchSafe is fetch with a panic turned into an error, so that a bug in
// one read does not take the process down; the loop backs off and retries.
func (r *shardRun) fetchSafe(ctx context.Context, rd *reader) (batch []*Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError("read", p)
		}
	}()
	return r.fetch(ctx, rd)
}

// fetch runs one read of the current phase and moves the phase on.
func (r *shardRun) fetch(ctx context.Context, rd *reader) ([]*Message, error) {
	cfg := r.core.cfg
	switch rd.phase {
	case phaseOwnPending:
		res, err := r.readGroup(ctx, &redis.XReadGroupArgs{
			Group: cfg.group, Consumer: r.core.id, Streams: []string{r.key, rd.cursor},
			Count: int64(cfg.batch), Block: -1, // BLOCK is meaningless for pending reads
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("XREADGROUP %s %s: %w", r.key, rd.cursor, err)
		}
		msgs := firstStream(res)
		if len(msgs) == 0 {
			rd.phase, rd.cursor = phaseClaim, "0-0"
			return nil, nil
		}
		rd.cursor = msgs[len(msgs)-1].ID
		return r.messages(ctx, msgs, true)
	case phaseClaim:
		// Sent once, like the reads: a claim sent again after its answer
		// was lost would find the entries the first one took no longer
		// idle, and leave them in this consumer's pending list unread.
		msgs, next, err := sendOnce(ctx, r.core.rdb, r.conn, func(b redis.Pipeliner) *redis.XAutoClaimCmd {
			return b.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: r.key, Group: cfg.group, Consumer: r.core.id,
				MinIdle: cfg.claimMinIdle, Start: rd.cursor, Count: int64(cfg.batch),
			})
		}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("XAUTOCLAIM %s %s: %w", r.key, rd.cursor, err)
		}
		rd.cursor = next
		if next == "" || next == "0-0" {
			rd.phase, rd.lastClaim = phaseNew, time.Now()
			r.updateLag(ctx)
		}
		return r.messages(ctx, msgs, true)
	default:
		if time.Since(rd.lastClaim) >= cfg.claimMinIdle {
			rd.phase, rd.cursor = phaseClaim, "0-0"
			return nil, nil
		}
		// Never block past the lease: a read still waiting when it ends
		// could be handed records after the member had to stop.
		block := min(cfg.block, r.core.lease.until())
		if block < time.Millisecond {
			return nil, nil
		}
		if rd.failing {
			block = -1 // no BLOCK: see reader.failing
		}
		args := &redis.XReadGroupArgs{
			Group: cfg.group, Consumer: r.core.id, Streams: []string{r.key, ">"},
			Count: int64(cfg.batch), Block: block,
		}
		var res []redis.XStream
		var err error
		if acks := r.takeReadAcks(rd.failing); len(acks) > 0 {
			res, err = r.readGroupAcking(ctx, args, acks)
		} else {
			res, err = r.readGroup(ctx, args)
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("XREADGROUP %s >: %w", r.key, err)
		}
		msgs := firstStream(res)
		r.setFullRead(len(msgs) == cfg.batch)
		if len(msgs) < cfg.batch {
			r.stats.setLag(0, true) // a short read: nothing more to read now
		}
		return r.messages(ctx, msgs, false)
	}
}

// readGroup runs one XREADGROUP on the run's read connection (readConn),
// sent at most once (redisconn.Once): sent again after its answer was
// lost, a read of new entries would move more of them into this
// consumer's pending list, and would block afresh past the lease the first
// send was bounded by.
func (r *shardRun) readGroup(ctx context.Context, a *redis.XReadGroupArgs) ([]redis.XStream, error) {
	return sendOnce(ctx, r.core.rdb, r.conn, func(b redis.Pipeliner) *redis.XStreamSliceCmd {
		return b.XReadGroup(ctx, a)
	}).Result()
}

// updateLag asks Redis how many entries of the shard the group has not
// read yet (XINFO GROUPS; Redis ≥ 7 knows, when no entry was deleted
// out of order), once per claim round. A failure only leaves the lag
// unknown.
func (r *shardRun) updateLag(ctx context.Context) {
	groups, err := r.core.rdb.XInfoGroups(ctx, r.key).Result()
	if err != nil {
		return
	}
	for _, g := range groups {
		if g.Name == r.core.cfg.group {
			r.stats.setLag(g.Lag, g.Lag >= 0)
			return
		}
	}
}

func firstStream(res []redis.XStream) []redis.XMessage {
	if len(res) == 0 {
		return nil
	}
	return res[0].Messages
}

// messages turns entries into Messages. A pending entry whose record was
// deleted (XDEL, trimming) comes back without fields: there is nothing to
// handle and it can never be handled, so it is acknowledged here — the one
// ACK the runtime makes on its own (doc.go rule 10) — but, like any ACK,
// only while the member may acknowledge (rules 8 and 9): a read whose
// answer arrives after a fence or a lapsed lease leaves it pending.
func (r *shardRun) messages(ctx context.Context, msgs []redis.XMessage, redelivered bool) ([]*Message, error) {
	out := make([]*Message, 0, len(msgs))
	var gone []string
	for _, m := range msgs {
		if m.Values == nil {
			gone = append(gone, m.ID)
			continue
		}
		out = append(out, &Message{
			StreamKey: r.key, Shard: r.shard, ID: m.ID, Fields: m.Values, Deliveries: 1,
			MemberID: r.core.id, Redelivered: redelivered, OwnerEpoch: r.ownerEpoch, run: r,
		})
	}
	if redelivered {
		r.deliveries(ctx, out)
	}
	if len(gone) > 0 {
		if err := r.ackAllowed(); err != nil {
			r.core.log.Debug("pending entries whose records were deleted left pending: ownership ended",
				slog.String("streamKey", r.key), slog.Any("ids", gone), slog.Any("reason", err))
		} else if err := r.core.rdb.XAck(ctx, r.key, r.core.cfg.group, gone...).Err(); err != nil {
			// Not fatal for the rest of the batch: the entries stay
			// pending and come back with the next claim.
			r.core.log.Warn("could not acknowledge pending entries whose records were deleted",
				slog.String("streamKey", r.key), slog.Any("ids", gone), slog.Any("error", err))
		} else {
			r.core.log.Debug("acknowledged pending entries whose records were deleted",
				slog.String("streamKey", r.key), slog.Any("ids", gone))
		}
	}
	return out, nil
}

// sleepOrStop waits d, or until ctx is done or stop is closed.
func sleepOrStop(ctx context.Context, stop <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-stop:
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
