package memberit_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// ackModes are the ways a handler settles a record, with how Redis shows
// that it did.
var ackModes = []struct {
	name string
	ack  func(m *member.Message, ctx context.Context) error
	// settled reports whether shard i of e shows every one of n records
	// settled.
	settled func(e *env, i int, n int) bool
}{
	{"Ack", (*member.Message).Ack, func(e *env, i, n int) bool {
		return e.pending(i) == 0 && e.length(i) == int64(n) // acknowledged, kept
	}},
	{"AckDel", (*member.Message).AckDel, func(e *env, i, n int) bool {
		return e.pending(i) == 0 && e.length(i) == 0 // acknowledged and deleted
	}},
}

// readAndSettle joins one member, publishes to every shard and checks that
// every record is handled once and settled in Redis.
func readAndSettle(t *testing.T, e *env) {
	for _, mode := range ackModes {
		t.Run(mode.name, func(t *testing.T) {
			rec := &recorder{}
			var ackErrs atomic.Int32
			r := e.start("rs-"+mode.name, func(ctx context.Context, m *member.Message) error {
				rec.add(m)
				if err := mode.ack(m, ctx); err != nil {
					ackErrs.Add(1)
					return err
				}
				return nil
			})
			const perShard = 7
			last := map[int]string{}
			for i := range e.shards {
				ids := e.publish(i, perShard, mode.name)
				last[i] = ids[perShard-1]
			}
			want := perShard * e.shards
			eventually(t, 10*time.Second, "every record handled", func() bool { return rec.distinct() == want })
			for i := range e.shards {
				eventually(t, 5*time.Second, "records settled in Redis", func() bool { return mode.settled(e, i, perShard) })
			}
			// Heartbeats report progress on every owned shard.
			eventually(t, 5*time.Second, "progress reported to the coordinator", func() bool {
				var c protocol.ConsumptionResponse
				e.coord.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/"+e.prefix+"/groups/"+e.prefix+"/consumption",
					nil, http.StatusOK, &c)
				done := 0
				for _, row := range c.Progress {
					if row.MemberID == "rs-"+mode.name+"-m0" && row.LastDeliveredID == last[row.Shard.ShardIndex] &&
						row.LastAckedID == last[row.Shard.ShardIndex] && row.PendingCount == 0 &&
						row.StreamKey == e.key(row.Shard.ShardIndex) {
						done++
					}
				}
				return done == e.shards
			})
			if err := r.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if n := ackErrs.Load(); n > 0 {
				t.Fatalf("%d acks failed", n)
			}
			for _, h := range rec.all() {
				if h.member != "rs-"+mode.name+"-m0" || h.redelivered {
					t.Fatalf("unexpected delivery %+v", h)
				}
			}
			if rec.count() != want {
				t.Fatalf("handled %d records, want exactly %d (no redelivery without a failure)", rec.count(), want)
			}
			for i := range e.shards {
				// Leave the shards empty for the next mode.
				if err := e.rdb.XTrimMaxLen(context.Background(), e.key(i), 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestReadAndSettleStandalone(t *testing.T) {
	t.Parallel()
	readAndSettle(t, newEnv(t, "basic", 3))
}

func TestReadAndSettleCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.NewCluster(t)
	client := cluster.Client()
	// Shards 0..5 of "orders" spread over the three masters.
	readAndSettle(t, newEnvOn(t, client, "orders", 6))
}

// TestNackRedeliveredAfterRestart: a Nacked record stays pending and is the
// first thing the member gets after it restarts (own pending entries are
// read first), marked redelivered.
func TestNackRedeliveredAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "nack", 1)
	first := &recorder{}
	r := e.start("rs-nack", func(ctx context.Context, m *member.Message) error {
		first.add(m)
		m.Nack()
		return nil
	})
	ids := e.publish(0, 3, "n")
	eventually(t, 10*time.Second, "three records handled", func() bool { return first.count() == 3 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if p := e.pending(0); p != 3 {
		t.Fatalf("pending after Nack = %d, want 3", p)
	}

	// New records published meanwhile must come after the redelivered ones.
	e.publish(0, 2, "later")
	second := &recorder{}
	r2 := e.start("rs-nack", func(ctx context.Context, m *member.Message) error {
		second.add(m)
		return m.Ack(ctx)
	})
	eventually(t, 10*time.Second, "five records handled", func() bool { return second.count() == 5 })
	got := second.all()
	for i, id := range ids {
		if got[i].id != id || !got[i].redelivered {
			t.Fatalf("delivery %d = %+v, want redelivered %s first", i, got[i], id)
		}
	}
	for _, h := range got[3:] {
		if h.redelivered {
			t.Fatalf("new record %s marked redelivered", h.id)
		}
	}
	eventually(t, 5*time.Second, "nothing pending", func() bool { return e.pending(0) == 0 })
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestHandlerErrorLeavesPending: a failing or panicking handler leaves its
// record pending; the member keeps going.
func TestHandlerErrorLeavesPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "errs", 1)
	var calls atomic.Int32
	r := e.start("rs-errs", func(ctx context.Context, m *member.Message) error {
		switch calls.Add(1) {
		case 1:
			return errors.New("boom")
		case 2:
			panic("bang")
		}
		return m.Ack(ctx)
	})
	e.publish(0, 4, "e")
	eventually(t, 10*time.Second, "four records handled", func() bool { return calls.Load() == 4 })
	eventually(t, 5*time.Second, "two left pending", func() bool { return e.pending(0) == 2 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Once Run returned, a stashed message can no longer be acknowledged.
	var late atomic.Pointer[member.Message]
	r2 := e.start("rs-errs", func(ctx context.Context, m *member.Message) error {
		late.Store(m)
		return nil
	})
	eventually(t, 10*time.Second, "a redelivery", func() bool { return late.Load() != nil })
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := late.Load().Ack(context.Background()); !errors.Is(err, member.ErrRevoked) {
		t.Fatalf("Ack after Run returned: %v, want ErrRevoked", err)
	}
	if p := e.pending(0); p != 2 {
		t.Fatalf("pending = %d, want 2", p)
	}
}
