package member

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestOverDeliveredRecordIsDeadLetteredOnArrival: a record that comes back
// from the pending entries list delivered more often than WithDeadLetter
// allows (its handler never got to fail: it crashed the process, say) is
// not handed to the handler: it goes to the dead-letter stream, with the
// last error this member remembers for it, and is acknowledged. Its
// delivery count is Redis's: every read of the pending entry counted.
func TestOverDeliveredRecordIsDeadLetteredOnArrival(t *testing.T) {
	f := newAckFixture(t, "overdelivered", 1)
	ctx := context.Background()
	f.tc.cfg.dlqMax, f.tc.cfg.dlqStream = 2, "overdelivered-dead"
	f.run.take(0)
	f.run.finish(1)
	var res []redis.XStream
	for range 2 { // deliveries 2 and 3: reads of this consumer's pending entries
		var err error
		res, err = f.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: f.tc.id,
			Streams: []string{f.run.key, "0"}, Block: -1}).Result()
		if err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := f.run.messages(ctx, res[0].Messages, true)
	if err != nil || len(msgs) != 1 || msgs[0].Deliveries != 3 {
		t.Fatalf("messages = %v, %v; want one record delivered 3 times", msgs, err)
	}
	crash := errors.New("worker crashed")
	f.tc.lastErrs.set(msgs[0].StreamKey+"/"+msgs[0].ID, crash)
	called := false
	f.tc.handler = func(context.Context, *Message) error { called = true; return nil }
	f.tc.hooks = &hooks{log: f.tc.log}
	f.run.deliver(msgs)
	f.tc.handle(f.run, f.run.take(0))
	f.run.finish(1)
	f.flush.flush()
	if called {
		t.Fatal("the handler was called for a record over its deliveries")
	}
	entries, err := f.rdb.XRange(ctx, "overdelivered-dead", "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("dead-letter stream: %v, %v", entries, err)
	}
	v := entries[0].Values
	if v["f"] != "v" || v[DeadLetterDeliveriesField] != "3" || v[DeadLetterErrorField] != crash.Error() || v[DeadLetterIDField] != msgs[0].ID {
		t.Fatalf("dead-letter entry %v", v)
	}
	if n := f.pending(t); n != 0 {
		t.Fatalf("%d pending after dead-lettering, want 0", n)
	}
	if n := f.run.stats.deadLettered.Load(); n != 1 {
		t.Fatalf("%d counted dead-lettered, want 1", n)
	}
}
