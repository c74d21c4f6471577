package memberit_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// panickingLog is a log handler that panics, once armed, on the first
// record with message msg: a member actor that logs it panics in the middle
// of a message, as a bug in the runtime would make it.
type panickingLog struct {
	slog.Handler
	msg   string
	armed *atomic.Bool
}

func (h panickingLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg && h.armed.CompareAndSwap(true, false) {
		panic("test: a member actor panics")
	}
	return h.Handler.Handle(ctx, r)
}

func (h panickingLog) WithAttrs(as []slog.Attr) slog.Handler {
	return panickingLog{Handler: h.Handler.WithAttrs(as), msg: h.msg, armed: h.armed}
}

func (h panickingLog) WithGroup(name string) slog.Handler {
	return panickingLog{Handler: h.Handler.WithGroup(name), msg: h.msg, armed: h.armed}
}

// failOnceWatch fails one heartbeat once armed (no request reaches the
// coordinator), and notes when the last heartbeat answered OK was sent and
// when the first join (epoch 0) after that failure went out.
type failOnceWatch struct {
	fail     atomic.Bool
	mu       sync.Mutex
	lastOK   time.Time
	failedAt time.Time
	joinAt   time.Time
	// joinAnswer is the status of the answer to the join at joinAt.
	joinAnswer protocol.Status
}

func (w *failOnceWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	hb, ok, err := peekHeartbeat(req)
	if err != nil {
		return nil, err
	}
	if !ok {
		return http.DefaultTransport.RoundTrip(req)
	}
	sent := time.Now()
	w.mu.Lock()
	firstJoin := hb.MemberEpoch == protocol.EpochJoin && !w.failedAt.IsZero() && w.joinAt.IsZero()
	if firstJoin {
		w.joinAt = sent
	}
	w.mu.Unlock()
	if hb.MemberEpoch > 0 && w.fail.CompareAndSwap(true, false) {
		w.mu.Lock()
		w.failedAt = sent
		w.mu.Unlock()
		return nil, errors.New("test: heartbeat lost")
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ans, err := peekAnswer(resp)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	if ans.Status == protocol.StatusOK && hb.MemberEpoch > 0 {
		w.lastOK = sent
	}
	if firstJoin {
		w.joinAnswer = ans.Status
	}
	w.mu.Unlock()
	return resp, nil
}

func (w *failOnceWatch) joinStatus() protocol.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.joinAnswer
}

func (w *failOnceWatch) times() (lastOK, failed, join time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastOK, w.failedAt, w.joinAt
}

// TestRestartAfterPanicWaitsForTheLeaseWhileHandlersRun: a member actor
// that panics is restarted by its supervisor; the old incarnation stops its
// handlers' contexts and waits 10s for them, and a handler that ignores its
// context outlives that wait. The new incarnation's join frees the
// member's shards at once (the same instanceId), so, as after a fence, it
// is not sent before the lease of the last answer has passed: another
// member would otherwise read the shard while the old handler still works
// on it. The lease here is longer than the 10s wait.
func TestRestartAfterPanicWaitsForTheLeaseWhileHandlersRun(t *testing.T) {
	t.Parallel()
	const lease = 12 * time.Second
	gcfg := testGroupConfig()
	gcfg.MemberLease = lease
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: gcfg})
	const prefix = "restartwait"
	coord.CreateStream(prefix, 1)
	rdb := redistest.Standalone(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redistest.CreateShards(ctx, rdb, prefix, 1, prefix); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, coord: coord, rdb: rdb, prefix: prefix, shards: 1}

	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	handling := make(chan struct{})
	var calls atomic.Int32
	handler := func(ctx context.Context, msg *member.Message) error {
		if calls.Add(1) > 1 {
			return msg.Ack(ctx)
		}
		close(handling)
		<-release // the context is not looked at
		return nil
	}
	var panicArmed atomic.Bool
	log := slog.New(panickingLog{Handler: testLogger(t).Handler(),
		msg: "heartbeat failed; retrying (the lease keeps running)", armed: &panicArmed})
	watch := &failOnceWatch{}
	r := e.start("rs-restart", handler, member.WithMemberLease(lease), member.WithLogger(log),
		member.WithHTTPClient(&http.Client{Transport: watch}))
	eventually(t, 15*time.Second, "the member owns the shard", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rs-restart-m0"]) == 1
	})
	e.publish(0, 1, "restart")
	select {
	case <-handling:
	case <-time.After(10 * time.Second):
		t.Fatal("no record reached the handler")
	}
	panicArmed.Store(true)
	watch.fail.Store(true)
	eventually(t, lease+10*time.Second, "the restarted member joins again", func() bool {
		_, _, join := watch.times()
		return !join.IsZero()
	})
	if panicArmed.Load() {
		t.Fatal("the member actor never logged the failed heartbeat (no panic)")
	}
	lastOK, failed, join := watch.times()
	if waited, least := join.Sub(lastOK), lease-100*time.Millisecond; waited < least {
		t.Fatalf("the restarted member joined %v after its last OK heartbeat was sent (%v after the panic), "+
			"a handler of the incarnation before still running; want at least the lease, %v", waited, join.Sub(failed), lease)
	}
	releaseOnce.Do(func() { close(release) })
	eventually(t, 15*time.Second, "the member owns the shard again", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rs-restart-m0"]) == 1
	})
	eventually(t, 10*time.Second, "the record is acknowledged by the new incarnation", func() bool {
		return e.pending(0) == 0
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRestartedMemberJoinsWithNewRequestIDs: a member actor restarted
// after a panic numbers its requests on from where the incarnation before
// stopped. Numbered from 1 again, its join carried the requestId of the
// first incarnation's join, which the coordinator answers RETRY as a late
// copy of a join already answered, until the lease of the incarnation
// before lapsed; and its later requests could be taken for retries of
// requests the coordinator had answered.
func TestRestartedMemberJoinsWithNewRequestIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "restartids", 1)
	var panicArmed atomic.Bool
	log := slog.New(panickingLog{Handler: testLogger(t).Handler(),
		msg: "heartbeat failed; retrying (the lease keeps running)", armed: &panicArmed})
	watch := &failOnceWatch{}
	r := e.start("rs-ids", func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) },
		member.WithLogger(log), member.WithHTTPClient(&http.Client{Transport: watch}))
	eventually(t, 15*time.Second, "the member owns the shard", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rs-ids-m0"]) == 1
	})
	panicArmed.Store(true)
	watch.fail.Store(true)
	eventually(t, 10*time.Second, "the join of the restarted member is answered", func() bool {
		return watch.joinStatus() != ""
	})
	if panicArmed.Load() {
		t.Fatal("the member actor never logged the failed heartbeat (no panic)")
	}
	if got := watch.joinStatus(); got != protocol.StatusOK {
		t.Fatalf("the join of the restarted member was answered %s, want OK", got)
	}
	eventually(t, 5*time.Second, "the member owns the shard again", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rs-ids-m0"]) == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
