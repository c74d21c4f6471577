package member_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rscoord/rscoord/client/member"
)

// tokenStore is a downstream store that keeps, per shard, the highest
// ownership token (Message.OwnerEpoch) it has seen, and refuses writes
// carrying a lower one: a member that lost a shard (paused past its lease,
// say) and wakes up with a record still in hand cannot overwrite what the
// shard's new owner already wrote.
type tokenStore struct {
	mu      sync.Mutex
	highest map[int]int64
	rows    map[string]string
}

var errStaleOwner = errors.New("stale owner: a newer ownership token was seen for this shard")

func (s *tokenStore) write(shard int, token int64, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest[shard] {
		return errStaleOwner
	}
	s.highest[shard] = token
	s.rows[key] = value
	return nil
}

// The fencing token in a handler: write with msg.OwnerEpoch, and leave the
// record pending (no Ack) when the store refuses it; the shard's current
// owner handles it.
func ExampleMessage_ownerEpoch() {
	store := &tokenStore{highest: map[int]int64{}, rows: map[string]string{}}
	handler := func(ctx context.Context, msg *member.Message) error {
		value, _ := msg.Fields["value"].(string)
		if err := store.write(msg.Shard, msg.OwnerEpoch, msg.ID, value); err != nil {
			return fmt.Errorf("shard %d: %w", msg.Shard, err) // stays pending
		}
		return msg.Ack(ctx)
	}
	_ = handler // member.New(handler, member.WithCoordinator(…), …)

	// What the store does when two owners of shard 3 write: the new owner
	// (token 8) first, then the old one (token 7) waking up late.
	fmt.Println(store.write(3, 8, "1-0", "new owner"))
	fmt.Println(store.write(3, 7, "1-0", "old owner"))
	fmt.Println(store.rows["1-0"])
	// Output:
	// <nil>
	// stale owner: a newer ownership token was seen for this shard
	// new owner
}
