package memberit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// readSpan is one XREADGROUP of a consumer, from its call to its return.
type readSpan struct {
	consumer   string
	block      bool // it blocks for new entries (BLOCK)
	start, end time.Time
	ids        []string // entries it returned
}

// readLog is a go-redis hook that records every XREADGROUP, and can hold
// CLIENT UNBLOCK back (holdUnblocks).
type readLog struct {
	mu    sync.Mutex
	reads []*readSpan
	// hold, while open, keeps every CLIENT UNBLOCK from being sent.
	hold chan struct{}
}

// holdUnblocks keeps CLIENT UNBLOCK from being sent until release is
// closed: a read the member interrupts then runs on until something else
// ends it.
func (l *readLog) holdUnblocks(release chan struct{}) {
	l.mu.Lock()
	l.hold = release
	l.mu.Unlock()
}

func (l *readLog) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (l *readLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (l *readLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "client" && len(args) > 1 && strings.EqualFold(fmt.Sprint(args[1]), "unblock") {
			l.mu.Lock()
			hold := l.hold
			l.mu.Unlock()
			if hold != nil {
				select {
				case <-hold:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if cmd.Name() != "xreadgroup" {
			return next(ctx, cmd)
		}
		args := cmd.Args() // xreadgroup group G C …
		sp := &readSpan{start: time.Now()}
		if len(args) > 3 {
			sp.consumer, _ = args[3].(string)
		}
		for _, a := range args {
			if s, ok := a.(string); ok && strings.EqualFold(s, "block") {
				sp.block = true
			}
		}
		l.mu.Lock()
		l.reads = append(l.reads, sp)
		l.mu.Unlock()
		err := next(ctx, cmd)
		var ids []string
		if u, ok := cmd.(interface{ Unwrap() redis.Cmder }); ok {
			cmd = u.Unwrap() // the member's reads are marked to go once
		}
		if c, ok := cmd.(*redis.XStreamSliceCmd); ok {
			for _, s := range c.Val() {
				for _, m := range s.Messages {
					ids = append(ids, m.ID)
				}
			}
		}
		l.mu.Lock()
		sp.end, sp.ids = time.Now(), ids
		l.mu.Unlock()
		return err
	}
}

// startedBefore lists the reads of consumer that started before t, with
// their end (zero while still running).
func (l *readLog) startedBefore(consumer string, t time.Time) []readSpan {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []readSpan
	for _, sp := range l.reads {
		if sp.consumer == consumer && sp.start.Before(t) {
			out = append(out, *sp)
		}
	}
	return out
}

// blockingCount is how many blocking reads of consumer are under way.
func (l *readLog) blockingCount(consumer string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, sp := range l.reads {
		if sp.consumer == consumer && sp.block && sp.end.IsZero() {
			n++
		}
	}
	return n
}

// blocking reports whether a blocking read of consumer is under way.
func (l *readLog) blocking(consumer string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sp := range l.reads {
		if sp.consumer == consumer && sp.block && sp.end.IsZero() {
			return true
		}
	}
	return false
}

// beat is one heartbeat a member sent, with the status it was answered.
type beat struct {
	epoch        int64
	sent, answer time.Time
	status       protocol.Status
}

// beatLog is an HTTP transport that records every heartbeat.
type beatLog struct {
	mu    sync.Mutex
	beats []beat
}

func (l *beatLog) RoundTrip(req *http.Request) (*http.Response, error) {
	hb, ok, err := peekHeartbeat(req)
	if err != nil {
		return nil, err
	}
	if !ok {
		return http.DefaultTransport.RoundTrip(req)
	}
	b := beat{epoch: hb.MemberEpoch, sent: time.Now()}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ans, err := peekAnswer(resp)
	if err != nil {
		return nil, err
	}
	b.answer, b.status = time.Now(), ans.Status
	l.mu.Lock()
	l.beats = append(l.beats, b)
	l.mu.Unlock()
	return resp, nil
}

// after is the first heartbeat matching ok sent at or after t.
func (l *beatLog) after(t time.Time, ok func(beat) bool) (beat, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.beats {
		if !b.sent.Before(t) && ok(b) {
			return b, true
		}
	}
	return beat{}, false
}

// TestFencedMemberRejoinsAfterItsReadsEnd: a fence stops a member's reads,
// but a blocking XREADGROUP issued before it runs on in Redis until the
// member's CLIENT UNBLOCK reaches Redis, or its BLOCK ends. The member's join (epoch 0) frees its shards for others at
// once, so it is sent only after every such read returned; and records
// that read brings back after the fence are never handed to the handler
// nor acknowledged: they stay pending and come back (redelivered) to the
// shard's next owner.
func TestFencedMemberRejoinsAfterItsReadsEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	reads := &readLog{}
	rdb := srv.Client()
	rdb.AddHook(reads)
	e := newEnvOn(t, rdb, "fenceread", 1)
	const block = 1500 * time.Millisecond // under the 2 s lease
	beats := &beatLog{}
	var (
		mu       sync.Mutex
		handled  []*member.Message
		assigned = make(chan []int, 8)
		// onRevoked, if set, runs once in OnRevoked: at the fence, after
		// the member stopped dispatch and ACKs.
		onRevoked func()
	)
	r := e.start("rs-fr", func(ctx context.Context, m *member.Message) error {
		mu.Lock()
		handled = append(handled, m)
		mu.Unlock()
		return m.Ack(ctx)
	}, member.WithBlock(block), member.WithHTTPClient(&http.Client{Transport: beats}),
		member.WithOnAssigned(func(ctx context.Context, shards []int) { assigned <- shards }),
		member.WithOnRevoked(func(ctx context.Context, shards []int) {
			mu.Lock()
			f := onRevoked
			onRevoked = nil
			mu.Unlock()
			if f != nil {
				f()
			}
		}))
	const consumer = "rs-fr-m0"
	select {
	case <-assigned:
	case <-time.After(10 * time.Second):
		t.Fatal("the member was never assigned its shard")
	}

	// fence makes a zombie heartbeat with the member's id, incarnation and
	// epoch claim a shard it does not own: the coordinator fences the
	// member, whose next heartbeat is answered FENCED_MEMBER_EPOCH.
	fence := func(tag string) (fencedAt, rejoinAt time.Time) {
		t.Helper()
		var members protocol.MembersResponse
		e.coord.JSON(http.MethodGet, protocol.BasePath+"/monitoring/streams/fenceread/groups/fenceread/members", nil, http.StatusOK, &members)
		if len(members.Members) != 1 {
			t.Fatalf("members %+v", members.Members)
		}
		zombie := protocol.HeartbeatRequest{
			ProtocolVersion: protocol.CurrentVersion, RequestID: "zombie-" + tag, MemberID: consumer, MemberName: "zombie",
			InstanceID: r.rt.InstanceID(), MemberEpoch: members.Members[0].MemberEpoch, MetadataVersion: members.Members[0].MetadataVersion,
			RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1, AvailableConcurrency: 1},
			OwnedShards:             protocol.Shards([]int{99}),
		}
		start := time.Now()
		if resp := e.coord.Heartbeat("fenceread", "fenceread", zombie); resp.Status != protocol.StatusFencedMemberEpoch {
			t.Fatalf("zombie heartbeat answered %s, want FENCED_MEMBER_EPOCH", resp.Status)
		}
		var fenced, rejoin beat
		eventually(t, 10*time.Second, "the member fenced and rejoining", func() bool {
			var ok bool
			if fenced, ok = beats.after(start, func(b beat) bool { return b.status == protocol.StatusFencedMemberEpoch }); !ok {
				return false
			}
			rejoin, ok = beats.after(fenced.answer, func(b beat) bool { return b.epoch == protocol.EpochJoin })
			return ok
		})
		return fenced.answer, rejoin.sent
	}
	waitAssigned := func() {
		t.Helper()
		select {
		case <-assigned:
		case <-time.After(10 * time.Second):
			t.Fatal("the member did not get its shard back after rejoining")
		}
	}

	// 1. Idle shard: the read in flight at the fence is cut short; the
	// rejoin waits until it has returned.
	eventually(t, 10*time.Second, "a blocking read under way", func() bool { return reads.blocking(consumer) })
	fencedAt, rejoinAt := fence("1")
	for _, sp := range reads.startedBefore(consumer, fencedAt) {
		if sp.end.IsZero() || sp.end.After(rejoinAt) {
			t.Fatalf("the member rejoined at %s while its read started at %s was still running (ended %s)",
				rejoinAt.Format("15:04:05.000"), sp.start.Format("15:04:05.000"), sp.end.Format("15:04:05.000"))
		}
	}
	waitAssigned()

	// 2. A record arrives while the fenced member's read still blocks:
	// Redis hands it to that read. It must not reach the handler under
	// the ended ownership, nor be acknowledged; it comes back from the
	// pending list after the rejoin. The member's CLIENT UNBLOCK is held
	// back until the record is added, or it could end the read first.
	eventually(t, 10*time.Second, "a blocking read under way", func() bool { return reads.blocking(consumer) })
	var lateID string
	published := make(chan struct{})
	reads.holdUnblocks(published)
	mu.Lock()
	onRevoked = func() {
		defer close(published)
		id, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{
			Stream: e.key(0), Values: map[string]any{"eventId": "late"}}).Result()
		if err != nil {
			t.Errorf("XADD: %v", err)
			return
		}
		lateID = id
	}
	mu.Unlock()
	fencedAt, rejoinAt = fence("2")
	<-published
	var gotBy *readSpan
	for _, sp := range reads.startedBefore(consumer, fencedAt) {
		if sp.end.IsZero() || sp.end.After(rejoinAt) {
			t.Fatalf("the member rejoined at %s while its read started at %s was still running",
				rejoinAt.Format("15:04:05.000"), sp.start.Format("15:04:05.000"))
		}
		for _, id := range sp.ids {
			if id == lateID {
				gotBy = &sp
			}
		}
	}
	if gotBy == nil {
		t.Fatalf("record %s, added after the fence, was not returned by the read that was blocking then: the case is not exercised", lateID)
	}
	waitAssigned()
	eventually(t, 10*time.Second, "the late record handled after the rejoin", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range handled {
			if m.ID == lateID {
				return true
			}
		}
		return false
	})
	mu.Lock()
	for _, m := range handled {
		if m.ID == lateID && !m.Redelivered {
			t.Errorf("record %s was handled as a new entry: it was dispatched from the read that ran past the fence", lateID)
		}
	}
	mu.Unlock()
	eventually(t, 5*time.Second, "nothing pending", func() bool { return e.pending(0) == 0 })
	if err := r.stop(t); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
