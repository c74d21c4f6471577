package member

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
)

// xackCounter is a go-redis hook that records the ids of every XACK and
// XCLAIM the client sends, piped or not.
type xackCounter struct {
	mu     sync.Mutex
	xacks  [][]string
	claims int
}

func (h *xackCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *xackCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(cmd)
		return next(ctx, cmd)
	}
}

func (h *xackCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.see(c)
		}
		return next(ctx, cmds)
	}
}

func (h *xackCounter) see(cmd redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch strings.ToUpper(cmd.Name()) {
	case "XACK":
		var ids []string
		for _, a := range cmd.Args()[3:] {
			ids = append(ids, a.(string))
		}
		h.xacks = append(h.xacks, ids)
	case "XCLAIM":
		h.claims++
	}
}

func (h *xackCounter) sent() ([][]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.xacks), h.claims
}

// ackFixture is one shard on a real Redis with records read into the
// test core's pending list, and a flusher whose loop does not run: the
// test calls flush itself.
type ackFixture struct {
	tc    *testCore
	run   *shardRun
	rdb   *redis.Client
	hook  *xackCounter
	msgs  []*Message
	flush *ackFlusher
}

func newAckFixture(t *testing.T, stream string, records int) *ackFixture {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	hook := &xackCounter{}
	rdb.AddHook(hook)
	tc := newTestCore(t, 1)
	tc.rdb = rdb
	tc.cfg = &config{stream: stream, group: "g", batch: records}
	tc.flusher = newAckFlusher(tc.memberCore, 256, time.Hour, 5*time.Second)
	run := newShardRun(tc.memberCore, 0, 1)
	if err := rdb.XGroupCreateMkStream(ctx, run.key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for range records {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: run.key, Values: []any{"f", "v"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: tc.id, Streams: []string{run.key, ">"},
		Count: int64(records), Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := run.messages(ctx, res[0].Messages, false)
	if err != nil || len(msgs) != records {
		t.Fatalf("messages: %d, %v", len(msgs), err)
	}
	if !run.deliver(msgs) {
		t.Fatal("a live run refused a batch")
	}
	return &ackFixture{tc: tc, run: run, rdb: rdb, hook: hook, msgs: msgs, flush: tc.flusher}
}

func (f *ackFixture) pending(t *testing.T) int64 {
	t.Helper()
	p, err := f.rdb.XPending(context.Background(), f.run.key, "g").Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

// TestCoalescedAcksAreOneXACK: acks of one shard's records are accepted at
// once and reach Redis as one XACK; the run's progress and counters follow
// the XACK, not the Ack calls.
func TestCoalescedAcksAreOneXACK(t *testing.T) {
	f := newAckFixture(t, "coalesce", 100)
	ctx := context.Background()
	got := f.run.take(0)
	for _, m := range got {
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := got[0].Ack(ctx); err != nil {
		t.Fatalf("a second Ack of a record = %v, want nil", err)
	}
	if xacks, _ := f.hook.sent(); len(xacks) != 0 {
		t.Fatalf("%d XACKs before the flush, want none (coalesced)", len(xacks))
	}
	if n := f.pending(t); n != 100 {
		t.Fatalf("%d pending before the flush, want 100", n)
	}
	f.run.finish(len(got))
	f.flush.flush()
	xacks, _ := f.hook.sent()
	if len(xacks) != 1 || len(xacks[0]) != 100 {
		t.Fatalf("XACKs sent: %d (%v); want one of 100 ids", len(xacks), xacks)
	}
	if n := f.pending(t); n != 0 {
		t.Fatalf("%d pending after the flush, want 0", n)
	}
	p := f.run.progress()
	if p.PendingCount != 0 || p.LastAckedID != got[99].ID || f.run.stats.acked.Load() != 100 {
		t.Fatalf("progress %+v, acked %d; want 0 pending, last acked %s, 100 acked", p, f.run.stats.acked.Load(), got[99].ID)
	}
}

// TestStoppingRunDrainsOnlyOnceAcksAreSent: a revoked run whose handlers
// are done but whose acks are still queued is not drained, and so not
// reported REVOKED, until they reached Redis.
func TestStoppingRunDrainsOnlyOnceAcksAreSent(t *testing.T) {
	f := newAckFixture(t, "drainacks", 3)
	got := f.run.take(0)
	for _, m := range got {
		if err := m.Ack(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	f.run.finish(len(got))
	f.run.beginStop()
	if f.run.drained() || f.tc.idles() != 0 {
		t.Fatalf("drained %v with %d idle reports while its acks are queued; want neither", f.run.drained(), f.tc.idles())
	}
	f.flush.flush()
	if !f.run.drained() || f.tc.idles() != 1 || f.pending(t) != 0 {
		t.Fatalf("after the flush: drained %v, %d idle reports, %d pending; want drained, 1, 0",
			f.run.drained(), f.tc.idles(), f.pending(t))
	}
}

// TestQueuedAcksAreNotSentAfterOwnershipEnds: acks accepted before a fence
// or a lapsed lease are never sent: the records stay pending for the
// shard's owner; an Ack after the fence fails as a synchronous one would.
func TestQueuedAcksAreNotSentAfterOwnershipEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(f *ackFixture)
		err  error
	}{
		{"fenced", func(f *ackFixture) { f.run.fence(ErrFenced) }, ErrFenced},
		{"lease lapsed", func(f *ackFixture) { f.tc.lease.drop() }, ErrLeaseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAckFixture(t, "ended-"+strings.ReplaceAll(tc.name, " ", "-"), 4)
			got := f.run.take(0)
			for _, m := range got[:3] {
				if err := m.Ack(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			tc.end(f)
			if err := got[3].Ack(context.Background()); err == nil || !strings.Contains(err.Error(), tc.err.Error()) {
				t.Fatalf("Ack after the end = %v, want %v", err, tc.err)
			}
			f.flush.flush()
			if xacks, _ := f.hook.sent(); len(xacks) != 0 {
				t.Fatalf("XACKs sent after ownership ended: %v", xacks)
			}
			if n := f.pending(t); n != 4 {
				t.Fatalf("%d pending, want 4", n)
			}
		})
	}
}

// TestStopHandsBackQueuedRecordsToTheNextOwner: records read and not
// handed to a worker when the run stops are given back at once: they stay
// pending, but look long idle, so the next owner's first XAUTOCLAIM (with
// the default 30s min idle) takes them, in order, without their delivery
// counts rising.
func TestStopHandsBackQueuedRecordsToTheNextOwner(t *testing.T) {
	f := newAckFixture(t, "handback", 5)
	ctx := context.Background()
	first := f.run.take(1)
	f.run.beginStop()
	if f.run.drained() {
		t.Fatal("drained with a record being handled")
	}
	if err := first[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	f.run.finish(1)
	if f.run.drained() {
		t.Fatal("drained before the hand-back was sent")
	}
	f.flush.flush()
	if !f.run.drained() || f.tc.idles() != 1 {
		t.Fatalf("after the flush: drained %v, %d idle reports; want drained, 1", f.run.drained(), f.tc.idles())
	}
	claimed, _, err := f.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: f.run.key, Group: "g", Consumer: "next",
		MinIdle: 30 * time.Second, Start: "0-0", Count: 100}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range claimed {
		ids = append(ids, m.ID)
	}
	want := []string{f.msgs[1].ID, f.msgs[2].ID, f.msgs[3].ID, f.msgs[4].ID}
	if !slices.Equal(ids, want) {
		t.Fatalf("next owner claimed %v, want the four given back %v", ids, want)
	}
	ext, err := f.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: f.run.key, Group: "g", Start: "-", End: "+", Count: 10}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ext {
		if p.RetryCount != 2 { // read by this member, claimed by the next
			t.Fatalf("%s delivered %d times, want 2", p.ID, p.RetryCount)
		}
	}
}

// TestAcksRideTheNextRead: after a full read, the acks of its batch go out
// with the shard's next read of new entries, in one pipeline and without
// blocking, so that a busy shard pays one round trip per batch; the
// flusher then has nothing left to send.
func TestAcksRideTheNextRead(t *testing.T) {
	f := newAckFixture(t, "ride", 4)
	ctx := context.Background()
	f.tc.cfg.claimMinIdle, f.tc.cfg.block = time.Hour, time.Second
	f.run.setFullRead(true)
	got := f.run.take(0)
	for _, m := range got {
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.run.finish(len(got))
	if f.run.drained() {
		t.Fatal("drained with acks queued")
	}
	start := time.Now()
	batch, err := f.run.fetch(ctx, &reader{phase: phaseNew, lastClaim: time.Now()})
	if err != nil || len(batch) != 0 {
		t.Fatalf("fetch = %d records, %v; want none", len(batch), err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("the read carrying acks took %v: it blocked", took)
	}
	xacks, _ := f.hook.sent()
	if len(xacks) != 1 || len(xacks[0]) != 4 {
		t.Fatalf("XACKs %v, want one of the batch's 4 ids", xacks)
	}
	if n := f.pending(t); n != 0 || !f.run.drained() {
		t.Fatalf("%d pending, drained %v after the read; want 0, drained", n, f.run.drained())
	}
	f.flush.flush()
	if xacks, _ := f.hook.sent(); len(xacks) != 1 {
		t.Fatalf("the flusher sent the acks again: %v", xacks)
	}
}
