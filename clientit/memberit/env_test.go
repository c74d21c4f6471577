package memberit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// Timing of the test coordinator and members: short, so that joins,
// hand-offs and lease expiry take a fraction of a second. The member lease
// must equal the coordinator's.
const (
	testLease     = 2 * time.Second
	testInterval  = 200 * time.Millisecond
	testReconcile = 50 * time.Millisecond
	testBlock     = 100 * time.Millisecond
)

func testGroupConfig() assign.Config {
	return assign.Config{
		HeartbeatInterval: testInterval,
		ReconcileInterval: testReconcile,
		MemberLease:       testLease,
		RebalanceTimeout:  10 * time.Second,
	}
}

// env is one test's coordinator, Redis and stream.
type env struct {
	t      *testing.T
	coord  *coordtest.Server
	rdb    redis.UniversalClient
	prefix string
	shards int
}

// newEnv starts a coordinator and a standalone Redis with prefix's shards
// and consumer group (named like the prefix) created.
func newEnv(t *testing.T, prefix string, shards int) *env {
	t.Helper()
	srv := redistest.Standalone(t)
	return newEnvOn(t, srv.Client(), prefix, shards)
}

// newEnvOn is newEnv on a given Redis client (standalone or cluster).
func newEnvOn(t *testing.T, rdb redis.UniversalClient, prefix string, shards int) *env {
	t.Helper()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig()})
	coord.CreateStream(prefix, shards)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redistest.CreateShards(ctx, rdb, prefix, shards, prefix); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, coord: coord, rdb: rdb, prefix: prefix, shards: shards}
}

// key is the stream key of shard i.
func (e *env) key(i int) string { return protocol.StreamKey(e.prefix, i) }

// publish adds n records to shard i, each with an eventId field
// "{tag}-{i}-{j}", and returns their ids.
func (e *env) publish(i, n int, tag string) []string {
	e.t.Helper()
	ids := make([]string, n)
	for j := range n {
		id, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{
			Stream: e.key(i), Values: map[string]any{"eventId": fmt.Sprintf("%s-%d-%d", tag, i, j)},
		}).Result()
		if err != nil {
			e.t.Fatalf("XADD %s: %v", e.key(i), err)
		}
		ids[j] = id
	}
	return ids
}

// pending is the group's pending count on shard i.
func (e *env) pending(i int) int64 {
	e.t.Helper()
	p, err := e.rdb.XPending(context.Background(), e.key(i), e.prefix).Result()
	if err != nil {
		e.t.Fatalf("XPENDING %s: %v", e.key(i), err)
	}
	return p.Count
}

// length is XLEN of shard i.
func (e *env) length(i int) int64 {
	e.t.Helper()
	n, err := e.rdb.XLen(context.Background(), e.key(i)).Result()
	if err != nil {
		e.t.Fatalf("XLEN %s: %v", e.key(i), err)
	}
	return n
}

// running is a Runtime running in the background.
type running struct {
	rt     *member.Runtime
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs a runtime of base id base on e with the test timing plus
// opts; the test's cleanup stops it.
func (e *env) start(base string, handler member.Handler, opts ...member.Opt) *running {
	e.t.Helper()
	return e.startWith(base, func(opts ...member.Opt) (*member.Runtime, error) { return member.New(handler, opts...) }, opts...)
}

// startBatch is start with a batch handler.
func (e *env) startBatch(base string, handler member.BatchHandler, opts ...member.Opt) *running {
	e.t.Helper()
	return e.startWith(base, func(opts ...member.Opt) (*member.Runtime, error) { return member.NewBatch(handler, opts...) }, opts...)
}

func (e *env) startWith(base string, newRuntime func(...member.Opt) (*member.Runtime, error), opts ...member.Opt) *running {
	e.t.Helper()
	all := append([]member.Opt{
		member.WithCoordinator(e.coord.URL), member.WithStream(e.prefix), member.WithRedis(e.rdb),
		member.WithBaseID(base), member.WithMemberLease(testLease), member.WithBlock(testBlock),
		member.WithLeaveTimeout(3 * time.Second), member.WithLogger(testLogger(e.t)),
	}, opts...)
	rt, err := newRuntime(all...)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{rt: rt, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- rt.Run(ctx) }()
	e.t.Cleanup(func() { r.stop(e.t) })
	return r
}

// stop cancels the runtime and waits for Run (at most 15s).
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(15 * time.Second):
			t.Errorf("Run did not return 15s after its context was cancelled")
		}
	})
	return r.err
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll.Wait(d, 10*time.Millisecond, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// testLogger writes to the test log when -v is given, and stops writing
// once the test is over (late protoactor lines must not fail the run).
func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// recorder collects handled records.
type recorder struct {
	mu      sync.Mutex
	records []handled
}

type handled struct {
	member, key, id, eventID string
	shard                    int
	redelivered              bool
	at                       time.Time
}

func (r *recorder) add(msg *member.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev, _ := msg.Fields["eventId"].(string)
	r.records = append(r.records, handled{member: msg.MemberID, key: msg.StreamKey, id: msg.ID, eventID: ev,
		shard: msg.Shard, redelivered: msg.Redelivered, at: time.Now()})
}

func (r *recorder) all() []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]handled(nil), r.records...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.records)
}

// distinct is the number of distinct event ids handled.
func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, h := range r.records {
		seen[h.eventID] = true
	}
	return len(seen)
}

// peekHeartbeat decodes req's body when req is a heartbeat, and puts the
// body back for the request to go on; ok is false for any other request.
func peekHeartbeat(req *http.Request) (hb protocol.HeartbeatRequest, ok bool, err error) {
	if !strings.HasSuffix(req.URL.Path, "/heartbeat") || req.Body == nil {
		return hb, false, nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return hb, false, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if err := json.Unmarshal(body, &hb); err != nil {
		return hb, false, err
	}
	return hb, true, nil
}

// peekAnswer decodes resp's body as a heartbeat answer and puts the body
// back for the caller; an answer that does not decode is the zero one.
func peekAnswer(resp *http.Response) (protocol.HeartbeatResponse, error) {
	var ans protocol.HeartbeatResponse
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return ans, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	_ = json.Unmarshal(out, &ans)
	return ans, nil
}
