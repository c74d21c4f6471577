package memberit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestPendingRecoveryByClaim: member A reads records and never acknowledges
// them, and is stopped while a handler is blocked. Member B takes the
// shards over and gets A's records through XAUTOCLAIM.
func TestPendingRecoveryByClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "recover", 2)
	var seenA atomic.Int32
	block := make(chan struct{})
	a := e.start("rs-a", func(ctx context.Context, m *member.Message) error {
		if seenA.Add(1) == 6 {
			select { // the last one blocks until the leave timeout cancels it
			case <-block:
			case <-ctx.Done():
			}
		}
		return nil // never acknowledged
	}, member.WithLeaveTimeout(500*time.Millisecond))
	for i := range e.shards {
		e.publish(i, 3, "r")
	}
	eventually(t, 10*time.Second, "A handled every record", func() bool { return seenA.Load() == 6 })
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	close(block)
	if p := e.pending(0) + e.pending(1); p != 6 {
		t.Fatalf("pending after A stopped = %d, want 6", p)
	}

	rec := &recorder{}
	b := e.start("rs-b", func(ctx context.Context, m *member.Message) error {
		rec.add(m)
		return m.Ack(ctx)
	}, member.WithClaimMinIdle(200*time.Millisecond))
	eventually(t, 10*time.Second, "B recovered A's records", func() bool { return rec.distinct() == 6 })
	for _, h := range rec.all() {
		if h.member != "rs-b-m0" || !h.redelivered {
			t.Fatalf("record %+v: want a claimed redelivery to rs-b-m0", h)
		}
	}
	eventually(t, 5*time.Second, "nothing pending", func() bool { return e.pending(0)+e.pending(1) == 0 })
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseExpiryFailsClosed: once the coordinator is gone, the member
// stops reading within its lease (measured from the last successful
// heartbeat's send) and an in-flight handler's Ack fails.
func TestLeaseExpiryFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "lease", 2)
	var (
		mu      sync.Mutex
		last    time.Time
		revoked = make(chan []int, 4)
		inHand  = make(chan *member.Message, 1)
		ackErr  = make(chan error, 1)
	)
	r := e.start("rs-lease", func(ctx context.Context, m *member.Message) error {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
		if m.Fields["eventId"] == "hold-0-0" {
			inHand <- m
			<-ctx.Done() // cancelled when the lease expires
			ackErr <- m.Ack(context.Background())
			return nil
		}
		return m.Ack(ctx)
	}, member.WithMaxWorkers(2), member.WithOnRevoked(func(ctx context.Context, shards []int) { revoked <- shards }))
	e.publish(1, 3, "warm")
	eventually(t, 10*time.Second, "warm-up records acknowledged", func() bool { return e.pending(1) == 0 && e.length(1) == 3 })
	e.publish(0, 1, "hold")
	<-inHand

	stopped := time.Now()
	e.coord.Stop()
	// Keep publishing: none of it may be handled after the lease.
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for time.Since(stopped) < testLease+time.Second {
			e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.key(1), Values: map[string]any{"eventId": "late"}})
			<-tick.C
		}
	}()
	select {
	case err := <-ackErr:
		if !errors.Is(err, member.ErrLeaseExpired) {
			t.Fatalf("Ack after the lease: %v, want ErrLeaseExpired", err)
		}
		if since := time.Since(stopped); since > testLease+500*time.Millisecond {
			t.Fatalf("handler context cancelled %v after the coordinator stopped; lease is %v", since, testLease)
		}
	case <-time.After(testLease + 2*time.Second):
		t.Fatal("the in-flight handler's context was not cancelled after the lease")
	}
	select {
	case shards := <-revoked:
		if len(shards) != 2 {
			t.Fatalf("OnRevoked(%v), want both shards", shards)
		}
	case <-time.After(time.Second):
		t.Fatal("OnRevoked was not called at lease expiry")
	}
	<-pubDone
	mu.Lock()
	lastCall := last
	mu.Unlock()
	// The lease runs from the send of the last successful heartbeat, which
	// is before the coordinator stopped.
	if lastCall.After(stopped.Add(testLease)) {
		t.Fatalf("a handler ran %v after the coordinator stopped; the lease is %v", lastCall.Sub(stopped), testLease)
	}
	// No read delivered anything to the member after its lease: records
	// read but not handled stay pending, and their ids carry the time
	// they were added, which must be before the lease ended.
	pend, err := e.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{
		Stream: e.key(1), Group: e.prefix, Start: "-", End: "+", Count: 1000}).Result()
	if err != nil {
		t.Fatal(err)
	}
	leaseEnd := stopped.Add(testLease + 50*time.Millisecond).UnixMilli()
	for _, p := range pend {
		ms, _, _ := strings.Cut(p.ID, "-")
		if at, _ := strconv.ParseInt(ms, 10, 64); at > leaseEnd {
			t.Fatalf("record %s, added %dms after the lease ended, was read by %s", p.ID, at-leaseEnd, p.Consumer)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestFencedMemberStopsAndRejoins: when the coordinator fences the member
// (here: a zombie heartbeat with its id claims a shard it does not own),
// its next heartbeat stops reads and ACKs at once; it rejoins with epoch 0
// and reads again.
func TestFencedMemberStopsAndRejoins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "fence", 2)
	var (
		assigned = make(chan []int, 8)
		revoked  = make(chan []int, 8)
		inHand   = make(chan *member.Message, 1)
		ackErr   = make(chan error, 1)
		rec      = &recorder{}
	)
	r := e.start("rs-fence", func(ctx context.Context, m *member.Message) error {
		rec.add(m)
		if m.Fields["eventId"] == "hold-0-0" && !m.Redelivered {
			inHand <- m
			<-ctx.Done() // cancelled by the fence
			ackErr <- m.Ack(context.Background())
			return nil
		}
		return m.Ack(ctx)
	}, member.WithMaxWorkers(2),
		member.WithOnAssigned(func(ctx context.Context, shards []int) { assigned <- shards }),
		member.WithOnRevoked(func(ctx context.Context, shards []int) { revoked <- shards }))
	if got := <-assigned; len(got) != 2 {
		t.Fatalf("OnAssigned(%v), want both shards", got)
	}
	e.publish(0, 1, "hold")
	held := <-inHand

	// A zombie with the member's id, incarnation and epoch claims shard
	// 99: the coordinator fences the member.
	var members protocol.MembersResponse
	e.coord.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/fence/groups/fence/members", nil, http.StatusOK, &members)
	if len(members.Members) != 1 {
		t.Fatalf("members %+v", members.Members)
	}
	zombie := protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion, RequestID: "zombie-1", MemberID: "rs-fence-m0", MemberName: "zombie",
		InstanceID:  r.rt.InstanceID(),
		MemberEpoch: members.Members[0].MemberEpoch, MetadataVersion: members.Members[0].MetadataVersion,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1, AvailableConcurrency: 1},
		OwnedShards:             protocol.Shards([]int{99}),
	}
	if resp := e.coord.Heartbeat("fence", "fence", zombie); resp.Status != protocol.StatusFencedMemberEpoch {
		t.Fatalf("zombie heartbeat answered %s, want FENCED_MEMBER_EPOCH", resp.Status)
	}

	select {
	case err := <-ackErr:
		if !errors.Is(err, member.ErrFenced) {
			t.Fatalf("Ack after fencing: %v, want ErrFenced", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight handler was not cancelled by the fence")
	}
	if got := <-revoked; len(got) != 2 {
		t.Fatalf("OnRevoked(%v) at the fence, want both shards", got)
	}
	// After the rejoin both shards start again, each once its old read
	// loop has returned (possibly in two calls).
	again := map[int]bool{}
	for len(again) < 2 {
		select {
		case got := <-assigned:
			for _, s := range got {
				if again[s] {
					t.Fatalf("shard %d assigned twice after the rejoin", s)
				}
				again[s] = true
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the member did not rejoin with both shards: %v", again)
		}
	}
	// The held record was never acknowledged; after the rejoin it is
	// redelivered (own pending first) and everything new is read too.
	e.publish(1, 2, "after")
	eventually(t, 10*time.Second, "reading again after the rejoin", func() bool {
		return e.pending(0) == 0 && e.pending(1) == 0 && rec.distinct() == 3
	})
	redelivered := false
	for _, h := range rec.all() {
		if h.id == held.ID && h.redelivered {
			redelivered = true
		}
	}
	if !redelivered {
		t.Fatalf("the held record %s was not redelivered after the rejoin: %+v", held.ID, rec.all())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRunFailsOnInvalidRequest: INVALID_REQUEST and UNSUPPORTED_PROTOCOL
// stop the member and make Run fail loudly.
func TestRunFailsOnInvalidRequest(t *testing.T) {
	t.Parallel()
	for _, status := range []protocol.Status{protocol.StatusInvalidRequest, protocol.StatusUnsupportedProtocol} {
		t.Run(string(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req protocol.HeartbeatRequest
				_ = json.NewDecoder(r.Body).Decode(&req)
				_ = json.NewEncoder(w).Encode(protocol.HeartbeatResponse{
					ResponseTo: req.RequestID, Status: status, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
					HeartbeatIntervalMs: 100, RebalanceTimeoutMs: 1000, Assignment: protocol.EmptyAssignment(0),
				})
			}))
			defer srv.Close()
			rt, err := member.New(func(context.Context, *member.Message) error { return nil },
				member.WithCoordinator(srv.URL), member.WithStream("bad"), member.WithRedis(redistest.Standalone(t).Client()),
				member.WithBaseID("rs-bad"), member.WithConcurrency(2), member.WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = rt.Run(ctx)
			if err == nil || ctx.Err() != nil {
				t.Fatalf("Run = %v (ctx %v), want an error before the context ends", err, ctx.Err())
			}
			var perr *member.ProtocolError
			if !errors.As(err, &perr) || perr.Status != string(status) || perr.Stream != "bad" {
				t.Fatalf("Run = %v, want a ProtocolError %s naming the stream", err, status)
			}
			if !strings.Contains(err.Error(), string(status)) {
				t.Fatalf("Run error %q does not name %s", err, status)
			}
		})
	}
}
