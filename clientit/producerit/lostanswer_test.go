package producerit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestLostAnswerIsNotWrittenAgain: Redis executes the XADD and its answer is
// lost on the way back (the connection closes). go-redis, with its default
// options, sends a command again after such a loss, which for an XADD
// writes the record a second time and returns success; the producer's
// XADDs go once, so the record is in its shard once and the caller is told
// it may have been written.
func TestLostAnswerIsNotWrittenAgain(t *testing.T) {
	rdb := standaloneClient(t)
	proxy := redistest.NewProxy(t, rdb.(*redis.Client).Options().Addr)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr}) // go-redis defaults: 3 retries
	t.Cleanup(func() { viaProxy.Close() })
	f := newFixture(t, rdb, 2)
	p := f.producer(t, producer.WithRedis(viaProxy))
	ctx := context.Background()
	tests := []struct {
		name    string
		publish func() error
	}{
		{"Publish", func() error {
			_, _, err := p.Publish(ctx, "k", map[string]any{"v": 1})
			return err
		}},
		{"PublishBatch", func() error {
			return p.PublishBatch(ctx, []producer.Record{{PartitionKey: "k", Fields: map[string]any{"v": 2}}})[0].Err
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.totalLen(t, 2)
			proxy.DropAnswerTo("XADD")
			err := tc.publish()
			if proxy.Dropped() != i+1 {
				t.Fatalf("the proxy dropped %d answers, want %d", proxy.Dropped(), i+1)
			}
			if !errors.Is(err, producer.ErrPossiblyWritten) || !errors.Is(err, producer.ErrRetryable) {
				t.Fatalf("publish with its answer lost = %v, want an error matching ErrPossiblyWritten and ErrRetryable", err)
			}
			if n := f.totalLen(t, 2) - before; n != 1 {
				t.Fatalf("the record is in the stream %d times, want once", n)
			}
			// The client recovers: the next record is written once, answered.
			if err := tc.publish(); err != nil {
				t.Fatalf("publish after the loss: %v", err)
			}
			if n := f.totalLen(t, 2) - before; n != 2 {
				t.Fatalf("%d records in the stream after the next publish, want 2", n)
			}
		})
	}
}
