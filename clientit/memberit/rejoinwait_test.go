package memberit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
)

// rejoinWatch fences a joined member once armed, in the coordinator's
// place, and notes when that was and when the member's next join (epoch 0)
// went out.
type rejoinWatch struct {
	armed            atomic.Bool
	mu               sync.Mutex
	fencedAt, joinAt time.Time
}

func (w *rejoinWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	hb, ok, err := peekHeartbeat(req)
	if err != nil {
		return nil, err
	}
	if !ok {
		return http.DefaultTransport.RoundTrip(req)
	}
	w.mu.Lock()
	if hb.MemberEpoch == protocol.EpochJoin && !w.fencedAt.IsZero() && w.joinAt.IsZero() {
		w.joinAt = time.Now()
	}
	w.mu.Unlock()
	if hb.MemberEpoch <= 0 || !w.armed.CompareAndSwap(true, false) {
		return http.DefaultTransport.RoundTrip(req)
	}
	w.mu.Lock()
	w.fencedAt = time.Now()
	w.mu.Unlock()
	out, err := json.Marshal(protocol.HeartbeatResponse{ResponseTo: hb.RequestID, Status: protocol.StatusFencedMemberEpoch,
		MemberID: hb.MemberID, MemberEpoch: hb.MemberEpoch, HeartbeatIntervalMs: testInterval.Milliseconds(),
		RebalanceTimeoutMs: 10000, Assignment: protocol.EmptyAssignment(0)})
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": []string{"application/json"}},
		Body: io.NopCloser(bytes.NewReader(out)), Request: req}, nil
}

// times are when the fence was answered and the join after it sent.
func (w *rejoinWatch) times() (fenced, join time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fencedAt, w.joinAt
}

// TestRejoinWaitsForTheLeaseWhileHandlersRun: a member fenced while one of
// its handlers still runs (and does not look at its context) does not join
// again before the lease of its last answer has passed. Its join frees its
// shards at once (the same instanceId), so an earlier join would let
// another member read the shard while the handler still works on it; the
// coordinator itself would wait for that lease before freeing the shards
// of a member it could not tell from a new process.
func TestRejoinWaitsForTheLeaseWhileHandlersRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "rejoinwait", 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	handling := make(chan struct{}, 1)
	handler := func(_ context.Context, msg *member.Message) error {
		select {
		case handling <- struct{}{}:
		default:
		}
		<-release // the context is not looked at
		return nil
	}
	watch := &rejoinWatch{}
	r := e.start("rw", handler, member.WithHTTPClient(&http.Client{Transport: watch}))
	eventually(t, 15*time.Second, "the member owns the shard", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rw-m0"]) == 1
	})
	if err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.key(0), Values: []string{"k", "v"}}).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-handling:
	case <-time.After(10 * time.Second):
		t.Fatal("no record reached the handler")
	}
	watch.armed.Store(true)
	eventually(t, 10*time.Second, "the member joins again", func() bool {
		_, join := watch.times()
		return !join.IsZero()
	})
	fenced, join := watch.times()
	// The lease was renewed at most an interval (and an answer's way)
	// before the fence: at least the lease less that was left.
	if waited, least := join.Sub(fenced), testLease-2*testInterval-100*time.Millisecond; waited < least {
		t.Fatalf("joined again %v after the fence, its handler still running; want at least %v (the lease left)", waited, least)
	}
	releaseOnce.Do(func() { close(release) })
	eventually(t, 15*time.Second, "the member owns the shard again", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rw-m0"]) == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
