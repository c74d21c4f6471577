package member

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// Handler handles one record. It runs on one of the member's workers; ctx
// is cancelled when the member must stop at once (fenced, lease expired,
// drain deadline passed, Run ending), with WithHandlerDeadline(true) its
// deadline is the member's lease end as known when the record was handed
// over, and [MemberID] names the member.
//
// Nothing is acknowledged for the handler: it calls msg.Ack or msg.AckDel
// when the record is done, or msg.Nack (or nothing) to leave it pending for
// redelivery. A returned error (or a panic, recovered) is retried in place
// as WithHandlerRetry says (by default not at all), then logged, and the
// record stays pending. Records of one shard are handed to handlers one at
// a time, in stream order.
type Handler func(ctx context.Context, msg *Message) error

// BatchHandler handles the records of one shard read together (at most
// WithBatch), in stream order; see [NewBatch]. It settles them together
// ([AckAll], [AckDelAll]) or one by one (msg.Ack, msg.Nack), like a
// [Handler]. When it returns an error, the records it left unsettled are
// retried in place as WithHandlerRetry says, then left pending.
type BatchHandler func(ctx context.Context, msgs []*Message) error

// AckAll acknowledges records of one shard with one XACK. Errors, and
// what a nil return means (coalesced by default), as for [Message.Ack];
// nothing is acknowledged when one record may not be.
func AckAll(ctx context.Context, msgs []*Message) error {
	if outside, err := settleOutside(ctx, "ack", msgs, false); outside {
		return err
	}
	key, ids, err := oneShard("ack", msgs)
	if err != nil || len(ids) == 0 {
		return err
	}
	run := msgs[0].run
	if run.coalesce() {
		if err := run.queueAcks(msgs); err != nil {
			return fmt.Errorf("member: ack %s %d records: %w", key, len(ids), err)
		}
		return nil
	}
	if err := run.core.rdb.XAck(ctx, key, run.core.cfg.group, ids...).Err(); err != nil {
		return fmt.Errorf("member: ack %s %d records: XACK: %w", key, len(ids), err)
	}
	for _, m := range msgs {
		run.acked(m)
	}
	return nil
}

// AckDelAll acknowledges and deletes records of one shard in one step
// (see [Message.AckDel]). Errors as for [Message.Ack].
func AckDelAll(ctx context.Context, msgs []*Message) error {
	if outside, err := settleOutside(ctx, "ackdel", msgs, true); outside {
		return err
	}
	key, ids, err := oneShard("ackdel", msgs)
	if err != nil || len(ids) == 0 {
		return err
	}
	run := msgs[0].run
	if err := run.core.acker.ackDel(ctx, key, run.core.cfg.group, ids...); err != nil {
		return fmt.Errorf("member: ackdel %s %d records: %w", key, len(ids), err)
	}
	for _, m := range msgs {
		run.acked(m)
	}
	return nil
}

// oneShard checks that msgs were delivered by one run that may still
// acknowledge, and returns their key and ids.
func oneShard(op string, msgs []*Message) (string, []string, error) {
	if len(msgs) == 0 {
		return "", nil, nil
	}
	run := msgs[0].run
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		if m.run == nil {
			return "", nil, fmt.Errorf("member: %s %s %s: the message was not delivered by a Runtime", op, m.StreamKey, m.ID)
		}
		if m.run != run {
			return "", nil, fmt.Errorf("member: %s: records of more than one shard read (%s and %s)", op, msgs[0].StreamKey, m.StreamKey)
		}
		ids[i] = m.ID
	}
	if err := run.ackAllowed(); err != nil {
		return "", nil, fmt.Errorf("member: %s %s %d records: %w", op, run.key, len(msgs), err)
	}
	return run.key, ids, nil
}

// Errors an Ack or AckDel returns when the member may no longer acknowledge
// the record. None is worth retrying: the record stays pending and is
// redelivered to the shard's owner (processing is at-least-once).
var (
	// ErrFenced: the coordinator fenced the member or no longer knows it
	// (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), or it failed and stopped;
	// reads and ACKs stopped at once.
	ErrFenced = errors.New("member fenced: reads and ACKs stopped")
	// ErrLeaseExpired: no heartbeat succeeded for the member lease; reads
	// and ACKs stay stopped until a later OK.
	ErrLeaseExpired = errors.New("member assignment lease expired: reads and ACKs stopped")
	// ErrRevoked: the shard was given up (revoked and reported, or
	// abandoned at its drain deadline), or the Runtime stopped.
	ErrRevoked = errors.New("shard no longer owned by this member")
)

// Message is one stream entry delivered to a [Handler].
type Message struct {
	// StreamKey is the shard's Redis key, "{prefix}:{shard}".
	StreamKey string
	// Shard is the shard index.
	Shard int
	// ID is the entry id, e.g. "1700000000000-0".
	ID string
	// Fields are the entry's field-value pairs as go-redis decodes them
	// (values are strings).
	Fields map[string]any
	// MemberID is the logical member, and Redis consumer, that read it.
	MemberID string
	// Redelivered is true when the entry came from the pending entries
	// list (this member's own, or claimed from another consumer) rather
	// than as a new entry: it may have been handled before.
	Redelivered bool
	// OwnerEpoch is the shard's ownership token (fencing token) under
	// which this member read the record: a positive counter the
	// coordinator raises each time the shard moves to another member, and
	// never lowers. A downstream store that keeps the highest token seen
	// per shard and refuses writes with a lower one turns away a stale
	// owner's late writes (see the package example). 0 from a coordinator
	// that does not send tokens.
	OwnerEpoch int64
	// Attempt counts the handler calls for this record in this run, from
	// 1; above 1 it is a retry in place (WithHandlerRetry).
	Attempt int
	// Deliveries is Redis's delivery counter of the record: 1 for a new
	// entry; for one from the pending entries list (Redelivered), how many
	// times the group delivered it (XREADGROUP of pending entries and
	// XAUTOCLAIM count too), as XPENDING reports it right after the read;
	// 0 when that could not be read. WithDeadLetter acts on it.
	Deliveries int64

	run     *shardRun
	settler Settler     // set by NewMessage only: settled outside a Runtime
	settled atomic.Bool // acknowledged (Ack or AckDel succeeded)
	nacked  atomic.Bool
}

// Ack acknowledges the entry (XACK): it leaves the group's pending entries
// list and stays in the stream. It fails with an error wrapping
// [ErrFenced], [ErrLeaseExpired] or [ErrRevoked] when the member may no
// longer acknowledge it. Acking twice is harmless.
//
// What a nil return means depends on WithAckBatch and WithSyncAcks. By
// default acks are coalesced: Ack returns once the runtime has accepted
// the acknowledgement, and the member sends it with the other acks of the
// shard in one XACK (pipelined with those of its other shards) at most
// WithAckBatch's delay later, at once when its count is reached or the
// shard's read batch is done, and always before the shard is reported
// REVOKED or the member leaves. Until then the record is still pending in
// Redis: a crash, a fence or a lapsed lease before the XACK was sent (the
// runtime then does not send it: no ack after ownership ended) redelivers
// it, as at-least-once processing allows; an XACK that fails is logged
// and leaves it pending too. With WithSyncAcks(true) Ack sends its own
// XACK and returns after Redis answered it, with the Redis error if any.
func (m *Message) Ack(ctx context.Context) error {
	if m.settler != nil {
		_, err := settleOutside(ctx, "ack", []*Message{m}, false)
		return err
	}
	if m.run == nil {
		return fmt.Errorf("member: ack %s %s: the message was not delivered by a Runtime", m.StreamKey, m.ID)
	}
	if m.run.coalesce() {
		if err := m.run.queueAcks([]*Message{m}); err != nil {
			return fmt.Errorf("member: ack %s %s: %w", m.StreamKey, m.ID, err)
		}
		return nil
	}
	if err := m.run.ackAllowed(); err != nil {
		return fmt.Errorf("member: ack %s %s: %w", m.StreamKey, m.ID, err)
	}
	if err := m.run.core.rdb.XAck(ctx, m.StreamKey, m.run.core.cfg.group, m.ID).Err(); err != nil {
		return fmt.Errorf("member: ack %s %s: XACK: %w", m.StreamKey, m.ID, err)
	}
	m.run.acked(m)
	return nil
}

// AckDel acknowledges the entry and deletes it from the stream, atomically:
// XACKDEL … KEEPREF where the server has it (Redis ≥ 8.2, detected once per
// Run), else XACK and XDEL in one Lua script (both touch one key, so one
// slot on a cluster). Other consumer groups' pending references, if any,
// are kept, as KEEPREF does. Errors as for [Message.Ack]. AckDel is never
// coalesced: it returns once Redis answered.
func (m *Message) AckDel(ctx context.Context) error {
	if m.settler != nil {
		_, err := settleOutside(ctx, "ackdel", []*Message{m}, true)
		return err
	}
	if m.run == nil {
		return fmt.Errorf("member: ackdel %s %s: the message was not delivered by a Runtime", m.StreamKey, m.ID)
	}
	if err := m.run.ackAllowed(); err != nil {
		return fmt.Errorf("member: ackdel %s %s: %w", m.StreamKey, m.ID, err)
	}
	if err := m.run.core.acker.ackDel(ctx, m.StreamKey, m.run.core.cfg.group, m.ID); err != nil {
		return fmt.Errorf("member: ackdel %s %s: %w", m.StreamKey, m.ID, err)
	}
	m.run.acked(m)
	return nil
}

// Nack leaves the entry pending for redelivery; it is what returning
// without an Ack does, said explicitly. The entry comes back to the shard's
// owner first thing after a restart (own pending entries are read first),
// to any owner through XAUTOCLAIM once it has been idle for the claim min
// idle time, and to this member again in the same way.
func (m *Message) Nack() { m.nack() }

func (m *Message) nack() {
	if m.settler != nil {
		if !m.settled.Load() {
			m.nacked.Store(true)
			m.settler.Nack(m)
		}
		return
	}
	if m.nacked.CompareAndSwap(false, true) && m.run != nil && !m.settled.Load() {
		m.run.stats.nacked.Add(1)
	}
}
