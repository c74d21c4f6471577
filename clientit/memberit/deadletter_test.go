package memberit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
)

var errPoisonRecord = errors.New("poison record")

// TestPoisonRecordEndsOnTheDeadLetterStream: a record whose handler always
// fails is redelivered (the claim takes it back after the claim min idle)
// until Redis has delivered it maxDeliveries times; then it is XADDed to
// the dead-letter stream with its fields, origin, delivery count and last
// error, acknowledged, seen by OnDeadLetter and counted, and nothing is
// left pending. The good record beside it is handled once.
func TestPoisonRecordEndsOnTheDeadLetterStream(t *testing.T) {
	t.Parallel()
	const maxDeliveries = 3
	e := newEnv(t, "dlq", 1)
	var calls atomic.Int64
	var mu sync.Mutex
	var deliveries []int64
	var letters []member.DeadLetter
	ids := e.publish(0, 2, "p") // eventId p-0-0 is the poison, p-0-1 is good
	r := e.start("dlq", func(ctx context.Context, m *member.Message) error {
		if m.Fields["eventId"] == "p-0-0" {
			calls.Add(1)
			mu.Lock()
			deliveries = append(deliveries, m.Deliveries)
			mu.Unlock()
			return errPoisonRecord
		}
		return m.Ack(ctx)
	}, member.WithDeadLetter(maxDeliveries, "dlq-dead"), member.WithClaimMinIdle(50*time.Millisecond),
		member.WithHooks(member.Hooks{OnDeadLetter: func(_ context.Context, d member.DeadLetter) {
			mu.Lock()
			letters = append(letters, d)
			mu.Unlock()
		}}))
	eventually(t, 10*time.Second, "the poison record dead-lettered", func() bool {
		n, err := e.rdb.XLen(context.Background(), "dlq-dead").Result()
		return err == nil && n == 1
	})
	eventually(t, 5*time.Second, "nothing pending", func() bool { return e.pending(0) == 0 })
	entries, err := e.rdb.XRange(context.Background(), "dlq-dead", "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("dead-letter stream: %v, %v", entries, err)
	}
	f := entries[0].Values
	want := map[string]any{
		"eventId": "p-0-0", member.DeadLetterOriginField: e.key(0), member.DeadLetterIDField: ids[0],
		member.DeadLetterDeliveriesField: "3", member.DeadLetterErrorField: "handle: " + errPoisonRecord.Error(),
		member.DeadLetterMemberField: "dlq-m0",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("dead-letter field %s = %v, want %v (entry %v)", k, f[k], v, f)
		}
	}
	if n := calls.Load(); n != maxDeliveries {
		t.Errorf("handler called %d times for the poison record, want %d", n, maxDeliveries)
	}
	mu.Lock()
	if len(deliveries) != maxDeliveries || deliveries[0] != 1 || deliveries[maxDeliveries-1] != maxDeliveries {
		t.Errorf("Deliveries seen by the handler %v, want 1 … %d", deliveries, maxDeliveries)
	}
	if len(letters) != 1 || letters[0].Message.ID != ids[0] || letters[0].Deliveries != maxDeliveries ||
		!errors.Is(letters[0].Err, errPoisonRecord) || letters[0].ID != entries[0].ID {
		t.Errorf("OnDeadLetter saw %+v, want the poison record once with its error", letters)
	}
	mu.Unlock()
	var dead int64
	for _, s := range r.rt.Stats() {
		dead += s.DeadLettered
	}
	if dead != 1 {
		t.Errorf("Stats count %d dead-lettered records, want 1", dead)
	}
}
