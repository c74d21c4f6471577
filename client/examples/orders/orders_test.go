package main

import (
	"context"
	"errors"
	"testing"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/member/membertest"
	"github.com/rscoord/rscoord/client/producer"
)

// memStore is a Store in memory that fails its first failures writes.
type memStore struct {
	totals   map[string]int64
	orders   int64
	failures int
}

func (s *memStore) Add(_ context.Context, deltas map[string]int64, orders int64) (int64, error) {
	if s.failures > 0 {
		s.failures--
		return 0, errors.New("database unavailable")
	}
	for c, d := range deltas {
		s.totals[c] += d
	}
	s.orders += orders
	return s.orders, nil
}

func TestHandleBatch(t *testing.T) {
	ctx := context.Background()
	rec := membertest.NewRecorder("orders")
	msgs := []*member.Message{
		rec.Message(1, "1-0", map[string]string{member.PayloadField: Order{"o-1", "c-1", 2}.json()}),
		rec.Message(1, "2-0", map[string]string{member.PayloadField: Order{"o-2", "c-1", 3}.json()}),
		rec.Message(1, "3-0", map[string]string{"junk": "x"}),
	}
	store := &memStore{totals: map[string]int64{}, failures: 1}
	app := &App{Store: store}

	// The first write fails: nothing is acknowledged, so the Runtime's
	// retry in place hands the same batch over again.
	if err := app.HandleBatch(ctx, msgs); err == nil {
		t.Fatal("a failed write returned no error")
	}
	if got := rec.IDs(membertest.Pending); len(got) != 3 {
		t.Fatalf("pending after a failed write: %v, want all 3", got)
	}
	if err := app.HandleBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if got := rec.IDs(membertest.Acked); len(got) != 3 {
		t.Fatalf("acked %v, want all 3 (the junk record too)", got)
	}
	if store.totals["c-1"] != 5 || store.orders != 2 {
		t.Fatalf("totals %v orders %d, want c-1=5 and 2 orders", store.totals, store.orders)
	}
}

func TestHandleBatchFencedAckIsAnError(t *testing.T) {
	rec := membertest.NewRecorder("orders")
	rec.FailAcks(member.ErrFenced)
	app := &App{Store: &memStore{totals: map[string]int64{}}}
	msg := rec.Message(0, "1-0", map[string]string{member.PayloadField: Order{"o-1", "c-1", 1}.json()})
	if err := app.HandleBatch(context.Background(), []*member.Message{msg}); !errors.Is(err, member.ErrFenced) {
		t.Fatalf("HandleBatch = %v, want ErrFenced", err)
	}
}

// fakePublisher records what publishOrders publishes.
type fakePublisher struct{ keys []string }

func (f *fakePublisher) Publish(_ context.Context, key string, _ any) (string, string, error) {
	f.keys = append(f.keys, key)
	return "orders:0", "1-0", nil
}

func (f *fakePublisher) PublishBatch(context.Context, []producer.Record) []producer.Result {
	return nil
}

func TestPublishOrders(t *testing.T) {
	f := &fakePublisher{}
	if err := publishOrders(context.Background(), f, 7); err != nil {
		t.Fatal(err)
	}
	if len(f.keys) != 7 || f.keys[0] != "c-0" || f.keys[6] != "c-1" {
		t.Fatalf("published keys %v", f.keys)
	}
}
