package tally

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordfake"
	"github.com/rscoord/rscoord/client/member/membertest"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestHandleAddsAndAcks: the handler adds a record's field to its shard's
// total and acknowledges it; a record without the field is an error and
// is not acknowledged (it is retried, then dead-lettered).
func TestHandleAddsAndAcks(t *testing.T) {
	ctx := context.Background()
	rec := membertest.NewRecorder("t")
	s := &Service{cfg: Config{Field: "n"}}
	for i, f := range []map[string]string{{"n": "2"}, {"n": "3"}, {"x": "1"}} {
		err := s.handle(ctx, rec.Message(1, strconv.Itoa(i+1)+"-0", f))
		if (err != nil) != (i == 2) {
			t.Fatalf("record %d: handle = %v", i, err)
		}
		if i == 2 && !errors.Is(err, errBadRecord) {
			t.Fatalf("a record without the field: %v, want errBadRecord", err)
		}
	}
	if got := rec.IDs(membertest.Acked); len(got) != 2 {
		t.Fatalf("acked %v, want the two good records", got)
	}
	if s.Records() != 2 || s.Totals()[1] != 5 {
		t.Fatalf("records %d totals %v, want 2 and shard 1 = 5", s.Records(), s.Totals())
	}
}

// TestServiceDrainsAStream: the service, against the client module's fake
// coordinator and a real Redis, adds up every record of every shard once
// and leaves nothing pending; it stops when its context ends.
func TestServiceDrainsAStream(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	const stream, shards, records = "tally", 3, 90
	if err := redistest.CreateShards(ctx, rdb, stream, shards, stream); err != nil {
		t.Fatal(err)
	}
	want := map[int]int64{}
	for i := range records {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: protocol.StreamKey(stream, i%shards), Values: []any{"n", i}}).Err(); err != nil {
			t.Fatal(err)
		}
		want[i%shards] += int64(i)
	}
	fake, err := coordfake.New(coordfake.WithStream(stream, shards))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	svc, err := New(Config{Coordinator: []string{fake.URL()}, Stream: stream, Redis: rdb, Workers: 2,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(rctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(20 * time.Second)
	for svc.Records() < records || pending(ctx, t, rdb, stream, shards) > 0 {
		select {
		case <-tick.C:
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-timeout:
			cancel()
			<-done
			t.Fatalf("%d of %d records added in 20s", svc.Records(), records)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := svc.Totals(); len(got) != shards || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || svc.Records() != records {
		t.Fatalf("totals %v after %d records, want %v after %d", got, svc.Records(), want, records)
	}
}

func pending(ctx context.Context, t *testing.T, rdb redis.UniversalClient, stream string, shards int) int64 {
	t.Helper()
	var n int64
	for i := range shards {
		p, err := rdb.XPending(ctx, protocol.StreamKey(stream, i), stream).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += p.Count
	}
	return n
}
