package member

import (
	"context"
	"fmt"
	"maps"
)

// Settler settles the messages [NewMessage] builds, in place of a Runtime
// and Redis: a Handler under unit test calls msg.Ack, msg.AckDel,
// msg.Nack, [AckAll] or [AckDelAll] as it would in production, and the
// Settler sees each call. The test kit (package membertest) has one that
// records them; a Runtime never uses a Settler.
type Settler interface {
	// Settle acknowledges msgs (one for Ack and AckDel, all of them for
	// AckAll and AckDelAll); del is true for AckDel and AckDelAll. A
	// non-nil error is what the handler's call returns, and the messages
	// stay unsettled.
	Settle(ctx context.Context, msgs []*Message, del bool) error
	// Nack is called by Message.Nack on a message not acknowledged yet.
	Nack(msg *Message)
}

// NewMessage builds a message of shard streamKey (for instance
// "orders:3") with entry id and fields, settled by s instead of a Runtime:
// for unit tests of a [Handler] or [BatchHandler] without Redis or a
// coordinator. fields is copied. Set the other exported fields (MemberID,
// Redelivered, OwnerEpoch, Attempt) on the result as the test needs.
func NewMessage(s Settler, streamKey string, shard int, id string, fields map[string]any) *Message {
	return &Message{StreamKey: streamKey, Shard: shard, ID: id, Fields: maps.Clone(fields), Attempt: 1, settler: s}
}

// settleOutside settles msgs through their Settler when they were built
// by NewMessage (outside reports true), and does nothing for messages a
// Runtime delivered.
func settleOutside(ctx context.Context, op string, msgs []*Message, del bool) (outside bool, err error) {
	if len(msgs) == 0 || msgs[0].settler == nil {
		return false, nil
	}
	s := msgs[0].settler
	for _, m := range msgs {
		if m.settler != s {
			return true, fmt.Errorf("member: %s %s %s: messages of different settlers (or a Runtime's) settled together", op, m.StreamKey, m.ID)
		}
	}
	if err := s.Settle(ctx, msgs, del); err != nil {
		return true, fmt.Errorf("member: %s %s %s: %w", op, msgs[0].StreamKey, msgs[0].ID, err)
	}
	for _, m := range msgs {
		m.settled.Store(true)
	}
	return true, nil
}
