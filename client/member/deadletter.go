package member

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fields the runtime adds to a dead-lettered record, after the record's own
// field-value pairs (WithDeadLetter).
const (
	// DeadLetterOriginField holds the shard's stream key the record came
	// from, e.g. "orders:3".
	DeadLetterOriginField = "rscoord.origin"
	// DeadLetterIDField holds the record's entry id in that stream.
	DeadLetterIDField = "rscoord.id"
	// DeadLetterDeliveriesField holds Redis's delivery count of the record
	// when it was dead-lettered.
	DeadLetterDeliveriesField = "rscoord.deliveries"
	// DeadLetterErrorField holds the last handler error this process saw
	// for the record; empty when it saw none (the record came back after
	// a crash, say).
	DeadLetterErrorField = "rscoord.error"
	// DeadLetterMemberField holds the member that dead-lettered it.
	DeadLetterMemberField = "rscoord.member"
)

// DeadLetter is a record moved to the dead-letter stream (WithDeadLetter).
type DeadLetter struct {
	// Message is the record as it was delivered.
	Message *Message
	// Stream is the dead-letter stream and ID the new entry's id there.
	Stream, ID string
	// Deliveries is Redis's delivery count of the record.
	Deliveries int64
	// Err is the last handler error this process saw for it; nil when it
	// saw none.
	Err error
}

// WithDeadLetter moves records that keep failing to a dead-letter stream
// instead of redelivering them for ever. A record is handed to the handler
// at most maxDeliveries times, as Redis counts deliveries
// ([Message.Deliveries]): when the handler fails on the last of them (its
// error or panic, after WithHandlerRetry's attempts), and when a record
// arrives delivered more often than that (it crashed the process, say), it
// is XADDed to stream with its own fields plus DeadLetterOriginField,
// DeadLetterIDField, DeadLetterDeliveriesField, DeadLetterErrorField and
// DeadLetterMemberField, and then acknowledged like any record. The XADD
// comes first: a crash in between leaves the record pending and it may be
// dead-lettered twice (at-least-once). Both happen only while the member
// owns the shard, as an Ack does. Hooks.OnDeadLetter sees each record,
// ShardStats.DeadLettered counts them. A record whose delivery count
// could not be read (Deliveries 0) is never dead-lettered on arrival.
// Default off; maxDeliveries at least 1, stream a Redis key of 1–200
// bytes. In a Redis Cluster the stream may live on any node.
func WithDeadLetter(maxDeliveries int, stream string) Opt {
	return optFunc(func(c *config) { c.dlqMax, c.dlqStream, c.dlqSet = maxDeliveries, stream, true })
}

// lastErrors remembers the last handler error per record of one member,
// for the dead-letter entry of a record that comes back. It is bounded:
// past maxLastErrors records it forgets the oldest half.
type lastErrors struct {
	mu    sync.Mutex
	errs  map[string]error
	order []string
}

const maxLastErrors = 4096

func (l *lastErrors) set(key string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errs == nil {
		l.errs = map[string]error{}
	}
	if _, ok := l.errs[key]; !ok {
		l.order = append(l.order, key)
	}
	l.errs[key] = err
	if len(l.order) > maxLastErrors {
		for _, k := range l.order[:maxLastErrors/2] {
			delete(l.errs, k)
		}
		l.order = slices.Clone(l.order[maxLastErrors/2:])
	}
}

// take returns and forgets the last error of key.
func (l *lastErrors) take(key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.errs[key]
	delete(l.errs, key)
	return err
}

// overDelivered hands records delivered more often than WithDeadLetter
// allows to the dead-letter stream, and returns the others, in order.
func (c *memberCore) overDelivered(run *shardRun, msgs []*Message) []*Message {
	if c.cfg.dlqMax <= 0 || !slices.ContainsFunc(msgs, func(m *Message) bool { return m.Deliveries > int64(c.cfg.dlqMax) }) {
		return msgs // the usual case: nothing to move, nothing to copy
	}
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.Deliveries > int64(c.cfg.dlqMax) {
			c.deadLetter(run, m, c.lastErrs.take(m.StreamKey+"/"+m.ID))
			continue
		}
		out = append(out, m)
	}
	return out
}

// giveUp leaves records the handler failed on pending (a Nack), or
// dead-letters those on their last allowed delivery.
func (c *memberCore) giveUp(run *shardRun, msgs []*Message, err error) {
	for _, m := range msgs {
		if c.cfg.dlqMax > 0 && m.Deliveries >= int64(c.cfg.dlqMax) && !run.isStopping() {
			c.lastErrs.take(m.StreamKey + "/" + m.ID)
			c.deadLetter(run, m, err)
			continue
		}
		if c.cfg.dlqMax > 0 {
			c.lastErrs.set(m.StreamKey+"/"+m.ID, err)
		}
		m.nack()
	}
}

// deadLetter XADDs m to the dead-letter stream and acknowledges it, while
// the member may acknowledge it; on any failure it stays pending.
func (c *memberCore) deadLetter(run *shardRun, m *Message, lastErr error) {
	log := c.log.With(slog.String("streamKey", m.StreamKey), slog.String("id", m.ID), slog.Int64("deliveries", m.Deliveries))
	if err := run.ackAllowed(); err != nil {
		log.Debug("record not dead-lettered: ownership ended", slog.Any("reason", err))
		return
	}
	ctx, cancel := context.WithTimeout(run.handlerCtx, deadLetterTimeout)
	defer cancel()
	errText := ""
	if lastErr != nil {
		errText = lastErr.Error()
	}
	keys := make([]string, 0, len(m.Fields))
	for k := range m.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	values := make([]any, 0, 2*len(keys)+10)
	for _, k := range keys {
		values = append(values, k, m.Fields[k])
	}
	values = append(values, DeadLetterOriginField, m.StreamKey, DeadLetterIDField, m.ID,
		DeadLetterDeliveriesField, strconv.FormatInt(m.Deliveries, 10), DeadLetterErrorField, errText,
		DeadLetterMemberField, c.id)
	id, err := c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: c.cfg.dlqStream, Values: values}).Result()
	if err != nil {
		log.Warn("could not dead-letter a record; it stays pending", slog.String("deadLetterStream", c.cfg.dlqStream), slog.Any("error", err))
		m.nack()
		return
	}
	if err := m.Ack(ctx); err != nil {
		log.Warn("dead-lettered a record but could not acknowledge it; it stays pending and may be dead-lettered again",
			slog.String("deadLetterStream", c.cfg.dlqStream), slog.String("deadLetterId", id), slog.Any("error", err))
		return
	}
	run.stats.deadLettered.Add(1)
	log.Warn("record dead-lettered after too many deliveries", slog.String("deadLetterStream", c.cfg.dlqStream),
		slog.String("deadLetterId", id), slog.Int("maxDeliveries", c.cfg.dlqMax), slog.String("lastError", errText))
	c.hooks.deadLetter(run.handlerCtx, DeadLetter{Message: m, Stream: c.cfg.dlqStream, ID: id, Deliveries: m.Deliveries, Err: lastErr})
}

// deadLetterTimeout bounds the XADD and XACK of one dead-lettered record.
const deadLetterTimeout = 5 * time.Second

// deliveries fills in Redis's delivery counts of records that came from
// the pending entries list (own pending entries, claimed entries), from
// one XPENDING of their id range; a failure leaves them 0 (unknown).
func (r *shardRun) deliveries(ctx context.Context, msgs []*Message) {
	if len(msgs) == 0 {
		return
	}
	ext, err := r.core.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: r.key, Group: r.core.cfg.group, Start: msgs[0].ID, End: msgs[len(msgs)-1].ID,
		Count: int64(len(msgs)) + 64, Consumer: r.core.id,
	}).Result()
	if err != nil {
		r.core.log.Debug("delivery counts unknown", slog.String("streamKey", r.key), slog.Any("error", err))
		return
	}
	counts := make(map[string]int64, len(ext))
	for _, p := range ext {
		counts[p.ID] = p.RetryCount
	}
	for _, m := range msgs {
		m.Deliveries = counts[m.ID]
	}
}

// checkDeadLetter validates WithDeadLetter.
func checkDeadLetter(c *config) error {
	if !c.dlqSet {
		return nil
	}
	if c.dlqMax < 1 {
		return fmt.Errorf("WithDeadLetter: maxDeliveries %d is less than 1", c.dlqMax)
	}
	if c.dlqStream == "" || len(c.dlqStream) > 200 {
		return fmt.Errorf("WithDeadLetter: the stream %q must have 1–200 bytes", c.dlqStream)
	}
	return nil
}
