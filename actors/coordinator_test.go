package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/persistence"
)

// flakyStore fails group writes while failing is set; everything else goes
// to a real store.
type flakyStore struct {
	persistence.Store
	failing atomic.Bool
	saves   atomic.Int64
}

func (f *flakyStore) SaveGroup(ctx context.Context, g *assign.Group, ch *persistence.Changes, expected uint64) (uint64, error) {
	if f.failing.Load() {
		return 0, errors.New("injected write failure")
	}
	f.saves.Add(1)
	return f.Store.SaveGroup(ctx, g, ch, expected)
}

func start(t *testing.T, store persistence.Store) *Coordinator {
	t.Helper()
	c, err := Start(context.Background(), Config{
		Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AutoCreateGroups: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func pebbleStore(t *testing.T) *persistence.PebbleStore {
	t.Helper()
	s, err := persistence.OpenPebble(t.TempDir(), persistence.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func join(id string) *protocol.HeartbeatRequest {
	return &protocol.HeartbeatRequest{
		ProtocolVersion: 1, RequestID: id + "-join", MemberID: id, MemberEpoch: 0,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1},
		OwnedShards:             []protocol.Shard{}, RevokingShards: []protocol.RevokingShard{},
	}
}

func steady(id string, resp protocol.HeartbeatResponse) *protocol.HeartbeatRequest {
	req := join(id)
	req.RequestID = fmt.Sprintf("%s-%d", id, resp.MemberEpoch)
	req.MemberEpoch, req.MetadataVersion = resp.MemberEpoch, resp.MetadataVersion
	req.OwnedShards = resp.Assignment.AssignedShards
	return req
}

func TestWriteFailureAnswersRetryAndDropsTheChange(t *testing.T) {
	ctx := context.Background()
	store := &flakyStore{Store: pebbleStore(t)}
	c := start(t, store)
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	store.failing.Store(true)
	resp := c.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	if resp.Status != protocol.StatusRetry {
		t.Fatalf("join while the store fails: %s", resp.Status)
	}
	// The refused join left no trace: the group has no member.
	g, err := c.Group(ctx, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.TargetAssignmentSummary) != 0 || g.State != protocol.GroupEmpty {
		t.Fatalf("an unpersisted join is visible: %+v", g)
	}
	store.failing.Store(false)
	resp = c.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	if resp.Status != protocol.StatusOK || len(resp.Assignment.AssignedShards) != protocol.DefaultShardCount {
		t.Fatalf("join after the store healed: %+v", resp)
	}
}

func TestPanicRestartsOnlyThatGroupFromItsSnapshot(t *testing.T) {
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	for _, p := range []string{"orders", "payments"} {
		if _, err := c.CreateStream(ctx, p, protocol.CreateRequest{RequestedBy: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	first := c.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	other := c.Heartbeat(ctx, "payments", "payments", "p", join("p"))
	var once sync.Once
	c.env.testHooks.afterDecide = func(req *protocol.HeartbeatRequest) {
		if req.MemberID == "boom" {
			once.Do(func() { panic("injected") })
		}
	}
	if resp := c.Heartbeat(ctx, "orders", "orders", "boom", join("boom")); resp.Status != protocol.StatusRetry {
		t.Fatalf("heartbeat that panicked: %s", resp.Status)
	}
	// The restarted actor serves from its snapshot: the join it decided but
	// never persisted is gone, a is still there with its epoch, and the
	// other stream never noticed.
	g, err := c.Group(ctx, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.TargetAssignmentSummary["boom"]; ok || len(g.TargetAssignmentSummary) != 1 {
		t.Fatalf("after restart the group still has the unpersisted join: %+v", g.TargetAssignmentSummary)
	}
	resp := c.Heartbeat(ctx, "orders", "orders", "a", steady("a", first))
	if resp.Status != protocol.StatusOK || resp.MemberEpoch != first.MemberEpoch {
		t.Fatalf("after restart: %+v (first %+v)", resp, first)
	}
	if resp := c.Heartbeat(ctx, "payments", "payments", "p", steady("p", other)); resp.Status != protocol.StatusOK {
		t.Fatalf("other stream after the panic: %s", resp.Status)
	}
	if resp := c.Heartbeat(ctx, "orders", "orders", "boom", join("boom")); resp.Status != protocol.StatusOK {
		t.Fatalf("the member whose heartbeat panicked cannot join afterwards: %s", resp.Status)
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	cfg := Config{DefaultShards: -1, Group: assign.Config{HeartbeatInterval: time.Second, MemberLease: time.Second,
		ReconcileInterval: 2 * time.Second}}.EnsureDefaults()
	err := cfg.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"store", "default shard count", "member lease", "reconcile interval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// slowStore makes every group write take a while, as a busy disk would.
type slowStore struct {
	persistence.Store
	saves atomic.Int64
}

func (s *slowStore) SaveGroup(ctx context.Context, g *assign.Group, ch *persistence.Changes, expected uint64) (uint64, error) {
	s.saves.Add(1)
	// The duration is the point: writes slow enough that heartbeats queue
	// up behind them.
	time.Sleep(20 * time.Millisecond)
	return s.Store.SaveGroup(ctx, g, ch, expected)
}

// TestHeartbeatsShareSyncedWrites: heartbeats that queue up behind a write
// are answered after one shared write (group commit), each only once its
// changes are durable.
func TestHeartbeatsShareSyncedWrites(t *testing.T) {
	ctx := context.Background()
	store := &slowStore{Store: pebbleStore(t)}
	c := start(t, store)
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	before := store.saves.Load()
	const joins = 60
	var wg sync.WaitGroup
	answers := make([]protocol.HeartbeatResponse, joins)
	for i := range joins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("m%02d", i)
			answers[i] = c.Heartbeat(ctx, "orders", "orders", id, join(id))
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.Status != protocol.StatusOK {
			t.Fatalf("join %d answered %s", i, a.Status)
		}
	}
	writes := store.saves.Load() - before
	if writes >= joins/2 {
		t.Fatalf("%d joins took %d synced writes; queued heartbeats should share them", joins, writes)
	}
	// Every answered join is durable: a reload sees all members.
	rec, err := store.LoadGroup(ctx, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Group.Members) != joins {
		t.Fatalf("store holds %d members after %d answered joins", len(rec.Group.Members), joins)
	}
	t.Logf("%d joins, %d synced writes", joins, writes)
}

// TestWriteFailureAnswers503ToAdmin: an admin change the store refuses is a
// 503 STORE_UNAVAILABLE, and nothing of it is visible afterwards.
func TestWriteFailureAnswers503ToAdmin(t *testing.T) {
	ctx := context.Background()
	store := &flakyStore{Store: pebbleStore(t)}
	c := start(t, store)
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	store.failing.Store(true)
	_, err := c.CreateGroup(ctx, "orders", "billing", protocol.CreateRequest{RequestedBy: "t"})
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.CodeStoreUnavailable || perr.Code.HTTPStatus() != 503 {
		t.Fatalf("create group while the store fails: %v", err)
	}
	if _, err := c.Group(ctx, "orders", "billing"); !errors.As(err, &perr) || perr.Code != protocol.CodeGroupNotFound {
		t.Fatalf("the refused group is visible: %v", err)
	}
	store.failing.Store(false)
	if _, err := c.CreateGroup(ctx, "orders", "billing", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatalf("create group after the store healed: %v", err)
	}
}

// downStore answers every group call and Err with persistence.ErrFailed
// while down is set, as a store does between a failed write (a full disk)
// and its recovery; the real store's recovery is tested in persistence.
type downStore struct {
	persistence.Store
	down atomic.Bool
	// failedLoads counts the group loads refused while down, so a test can
	// wait for a reload attempt to have failed.
	failedLoads atomic.Int64
}

func (d *downStore) failed() error {
	return fmt.Errorf("injected: %w", persistence.ErrFailed)
}

func (d *downStore) SaveGroup(ctx context.Context, g *assign.Group, ch *persistence.Changes, expected uint64) (uint64, error) {
	if d.down.Load() {
		return 0, d.failed()
	}
	return d.Store.SaveGroup(ctx, g, ch, expected)
}

func (d *downStore) LoadGroup(ctx context.Context, prefix, name string) (persistence.GroupRecord, error) {
	if d.down.Load() {
		d.failedLoads.Add(1)
		return persistence.GroupRecord{}, d.failed()
	}
	return d.Store.LoadGroup(ctx, prefix, name)
}

func (d *downStore) Err(ctx context.Context) error {
	if d.down.Load() {
		return d.failed()
	}
	return d.Store.Err(ctx)
}

// TestGroupRecoversWhenTheStoreDoes: a group whose write failed because the
// store is down answers RETRY and reports the store degraded; once the
// store serves again the group reloads by itself and health is UP again,
// without a restart.
func TestGroupRecoversWhenTheStoreDoes(t *testing.T) {
	ctx := context.Background()
	store := &downStore{Store: pebbleStore(t)}
	c := start(t, store)
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if resp := c.Heartbeat(ctx, "orders", "orders", "a", join("a")); resp.Status != protocol.StatusOK {
		t.Fatalf("join: %s", resp.Status)
	}
	store.down.Store(true)
	if resp := c.Heartbeat(ctx, "orders", "orders", "b", join("b")); resp.Status != protocol.StatusRetry {
		t.Fatalf("join while the store is down: %s", resp.Status)
	}
	if h := c.Health(ctx); h.Status != protocol.HealthDegraded {
		t.Fatalf("health while the store is down: %+v", h)
	}
	// The reload after the failed write fails, and then a scheduled retry.
	poll.Until(t, 20*time.Second, func() bool { return store.failedLoads.Load() >= 2 }, "a reload attempt to fail")
	if resp := c.Heartbeat(ctx, "orders", "orders", "b", join("b")); resp.Status != protocol.StatusRetry {
		t.Fatalf("join while the store is still down: %s", resp.Status)
	}
	store.down.Store(false)
	poll.Until(t, 20*time.Second, func() bool { return c.Health(ctx).Status == protocol.HealthUp }, "health to come back UP")
	if resp := c.Heartbeat(ctx, "orders", "orders", "b", join("b")); resp.Status != protocol.StatusOK {
		t.Fatalf("join after the store recovered: %s", resp.Status)
	}
}

// A held heartbeat whose asker goes (its client disconnected, its context
// ended) stops waiting at once instead of at the end of its hold, and the
// answer the group actor sends later, to nobody, blocks nothing: the same
// member is answered again at once.
func TestHeldHeartbeatStopsWaitingWhenItsAskerGoes(t *testing.T) {
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	resp := c.Heartbeat(ctx, "orders", "orders", "a", join("a"))
	if resp.Status != protocol.StatusOK {
		t.Fatalf("join: %+v", resp)
	}
	held := steady("a", resp)
	held.WaitMs = 60_000 // held for the interval (3 s): nothing new to tell
	asker, leave := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, leave)
	start := time.Now()
	got := c.Heartbeat(asker, "orders", "orders", "a", held)
	if took := time.Since(start); took > 1500*time.Millisecond || got.Status != protocol.StatusRetry {
		t.Fatalf("held heartbeat whose asker left after 100ms: %s after %v, want RETRY at once", got.Status, took)
	}
	// The parked answer is still the group's: the member's next heartbeat
	// replaces it, and is answered.
	again := steady("a", resp)
	again.RequestID += "-again"
	if got := c.Heartbeat(ctx, "orders", "orders", "a", again); got.Status != protocol.StatusOK {
		t.Fatalf("next heartbeat: %+v", got)
	}
}

// A heartbeat handed to a group actor that stopped since its lookup is
// answered at once (RETRY), not at the end of the ask timeout.
func TestHeartbeatToAStoppedGroupActorFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	pid, err := c.lookup(ctx, "orders", "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.env.system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.askHeartbeat(ctx, pid, join("a"))
	if took := time.Since(start); err == nil || took > time.Second {
		t.Fatalf("heartbeat to a stopped group actor: %v after %v, want an error at once", err, took)
	}
}

// TestGroupsKeepsToItsContext: Groups answers by its caller's deadline,
// or once its ctx is cancelled, with the groups that answered by then,
// while another group's actor is busy far longer (AskTimeout is 10 s).
func TestGroupsKeepsToItsContext(t *testing.T) {
	const wait = 200 * time.Millisecond
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error // nil: none or the deadline's (the busy group's ask may end first, the same instant)
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), wait)
		}, nil},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(wait, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	ctx := context.Background()
	c := start(t, pebbleStore(t))
	// Groups asks in order of stream: a-fast answers before z-busy is
	// waited for.
	for _, p := range []string{"a-fast", "z-busy"} {
		if _, err := c.CreateStream(ctx, p, protocol.CreateRequest{RequestedBy: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	c.env.testHooks.afterDecide = func(req *protocol.HeartbeatRequest) {
		if strings.HasPrefix(req.MemberID, "busy") {
			entered <- struct{}{}
			<-release
		}
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			answered := make(chan struct{})
			go func() {
				defer close(answered)
				id := fmt.Sprintf("busy%d", i)
				c.Heartbeat(ctx, "z-busy", "z-busy", id, join(id))
			}()
			<-entered // z-busy's actor is inside the heartbeat now
			gctx, cancel := tc.ctx()
			defer cancel()
			began := time.Now()
			resp, err := c.Groups(gctx)
			took := time.Since(began)
			release <- struct{}{}
			<-answered
			if took > wait+2*time.Second {
				t.Fatalf("Groups took %v with a %v ctx", took, wait)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) || tc.wantErr == nil && err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Groups: %v, want %v", err, tc.wantErr)
			}
			var names []string
			for _, g := range resp.Groups {
				names = append(names, g.StreamPrefix)
			}
			if strings.Join(names, ",") != "a-fast" {
				t.Fatalf("groups listed: %v, want a-fast only", names)
			}
		})
	}
}
