package memberit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// Timing of the next-heartbeat tests: an interval long enough that a
// heartbeat sent at once stands out from the steady cadence.
const (
	nbInterval = time.Second
	nbLease    = 6 * time.Second
)

// newNextBeatEnv is newEnv with a heartbeat interval of nbInterval.
func newNextBeatEnv(t *testing.T, prefix string, shards int) *env {
	t.Helper()
	rdb := redistest.Standalone(t).Client()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: assign.Config{
		HeartbeatInterval: nbInterval, ReconcileInterval: testReconcile, MemberLease: nbLease, RebalanceTimeout: 10 * time.Second,
	}})
	coord.CreateStream(prefix, shards)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redistest.CreateShards(ctx, rdb, prefix, shards, prefix); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, coord: coord, rdb: rdb, prefix: prefix, shards: shards}
}

// answerLog records one member's heartbeat answers as OnHeartbeat sees them.
type answerLog struct {
	mu     sync.Mutex
	id     string
	events []answerEvent
	// after, when set, runs on the member's heartbeat loop after each
	// answer is recorded, before the member decides when to heartbeat next.
	after func()
}

type answerEvent struct {
	at       time.Time
	status   string
	epoch    int64
	assigned []int
}

func (b *answerLog) hook(_ context.Context, e member.HeartbeatEvent) {
	if e.MemberID != b.id {
		return
	}
	b.mu.Lock()
	b.events = append(b.events, answerEvent{at: time.Now(), status: e.Status, epoch: e.Epoch, assigned: e.Assigned})
	after := b.after
	b.mu.Unlock()
	if after != nil {
		after()
	}
}

func (b *answerLog) since(t time.Time) []answerEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []answerEvent
	for _, e := range b.events {
		if !e.at.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

func (b *answerLog) setAfter(f func()) {
	b.mu.Lock()
	b.after = f
	b.mu.Unlock()
}

// TestEpochAloneBringsNoHeartbeatAtOnce: a member whose shards stay the same
// while another member joins and leaves its group after every one of its
// answers — so that each heartbeat it sends is behind the group's epoch, the
// worst case — heartbeats about twice an interval (one answer at once
// because the request was behind, one catch-up), not again at once after
// every answer that carries only a new epoch (that would be one heartbeat
// per round trip for as long as the churn lasts).
func TestEpochAloneBringsNoHeartbeatAtOnce(t *testing.T) {
	t.Parallel()
	e := newNextBeatEnv(t, "calm", 1)
	beats := &answerLog{id: "calm-m0"}
	var shardHooks hookLog
	hooks := shardHooks.hooks()
	hooks.OnHeartbeat = beats.hook
	handler := func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) }
	r := e.start("calm", handler, member.WithMemberLease(nbLease), member.WithHooks(hooks))
	eventually(t, 10*time.Second, "the member reads its shard", func() bool {
		return shardHooks.has("assigned:assigned [0]") && len(assignments(t, e.coord, "calm")["calm-m0"]) == 1
	})

	// The other member, heartbeating by hand: it joins, then leaves, then
	// joins again…, one step after each answer of the member under test.
	// With one shard it never gets any: only epochs move.
	cl, err := coordclient.New([]string{e.coord.URL}, coordclient.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	var (
		churnMu  sync.Mutex
		churnErr []error
		steps    int
		epoch    int64 // the churning member's: 0 joins, -1 leaves
		version  int64 // the metadata version of its last answer, as a client reports it
	)
	churn := func() {
		churnMu.Lock()
		defer churnMu.Unlock()
		steps++
		req := protocol.HeartbeatRequest{
			ProtocolVersion: protocol.CurrentVersion, RequestID: fmt.Sprintf("churn-%d", steps), MemberID: "churn-m0",
			MemberName: "churn", MemberEpoch: epoch, MetadataVersion: version, InstanceID: "churn-instance",
			RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1, AvailableConcurrency: 1},
			OwnedShards:             []protocol.Shard{}, RevokingShards: []protocol.RevokingShard{}, ShardProgress: []protocol.ShardProgress{},
		}
		resp, err := cl.Heartbeat(context.Background(), "calm", "calm", &req)
		switch {
		case err != nil:
			churnErr = append(churnErr, err)
		case resp.Status != protocol.StatusOK:
			churnErr = append(churnErr, fmt.Errorf("churn step %d answered %s %s", steps, resp.Status, resp.Message))
		case len(resp.Assignment.AssignedShards) > 0:
			churnErr = append(churnErr, fmt.Errorf("churn member was given %v", resp.Assignment.AssignedShards))
		default:
			version = resp.MetadataVersion
		}
		if epoch == 0 {
			epoch = protocol.EpochLeave
		} else {
			epoch = 0
		}
	}

	const window = 4 * nbInterval
	start := time.Now()
	beats.setAfter(churn)
	poll.Hold(t.Context(), window) // the measured window
	beats.setAfter(nil)
	got := beats.since(start)

	churnMu.Lock()
	errs := slices.Clone(churnErr)
	churnMu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("churn: %v", errs)
	}
	epochs := map[int64]bool{}
	for _, ev := range got {
		if ev.status != string(protocol.StatusOK) || !slices.Equal(ev.assigned, []int{0}) {
			t.Fatalf("the member's answers changed: %+v", ev)
		}
		epochs[ev.epoch] = true
	}
	// The scenario is real: the churn moved the member's epoch again and
	// again, and its shards stayed put.
	if len(epochs) < 4 {
		t.Fatalf("the member saw %d epochs in %v (%d heartbeats): the churn did not reach it", len(epochs), window, len(got))
	}
	if changes := shardHooks.all(); len(changes) != 1 {
		t.Fatalf("shard hooks called while only epochs moved: %v", changes)
	}
	// About two a second, plus the start and the end of the window. One
	// heartbeat per answer would be hundreds.
	if limit := int(2*window/nbInterval) + 4; len(got) > limit {
		t.Fatalf("%d heartbeats in %v with only epochs moving; want at most %d", len(got), window, limit)
	}
	t.Logf("%d heartbeats, %d epochs in %v", len(got), len(epochs), window)

	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRevocationConfirmedAtOnce: a steady member, parked at the
// coordinator, whose shard a newcomer takes hears it at once (the held
// answer is released), stops reading and confirms the revocation at once:
// the newcomer reads the shard well within one heartbeat interval of its
// join, and the member's heartbeats after the revoking answer follow each
// other in round trips, not intervals.
func TestRevocationConfirmedAtOnce(t *testing.T) {
	t.Parallel()
	e := newNextBeatEnv(t, "yield", 2)
	beats := &answerLog{id: "yield-m0"}
	var a hookLog
	hooks := a.hooks()
	hooks.OnHeartbeat = beats.hook
	handler := func(ctx context.Context, msg *member.Message) error { return msg.Ack(ctx) }
	ra := e.start("yield", handler, member.WithMemberLease(nbLease), member.WithHooks(hooks))
	eventually(t, 10*time.Second, "the member reads both shards", func() bool {
		return len(assignments(t, e.coord, "yield")["yield-m0"]) == 2
	})
	// Steady: at least one held answer that ran its wait since.
	poll.Hold(t.Context(), nbInterval+nbInterval/2)

	joined := time.Now()
	rb := e.start("taker", handler, member.WithMemberLease(nbLease))
	eventually(t, 10*time.Second, "the newcomer reads a shard", func() bool {
		cur := assignments(t, e.coord, "yield")
		return len(cur["yield-m0"]) == 1 && len(cur["taker-m0"]) == 1
	})
	took := time.Since(joined)
	if took > nbInterval/2 {
		t.Fatalf("the hand-off took %v; with the revocation confirmed at once it takes round trips (interval %v)", took, nbInterval)
	}
	eventually(t, 5*time.Second, "OnRevoked with the shard given up", func() bool {
		return a.has("revoked:revoked [0]") || a.has("revoked:revoked [1]")
	})

	// From the answer that took a shard away to the confirmation that the
	// coordinator acted on: no gap of an interval.
	got := beats.since(joined)
	first := -1
	for i, ev := range got {
		if len(ev.assigned) == 1 {
			first = i
			break
		}
	}
	if first < 0 || first+1 >= len(got) {
		t.Fatalf("no revoking answer followed by another heartbeat: %+v", got)
	}
	if gap := got[first+1].at.Sub(got[first].at); gap > nbInterval/2 {
		t.Fatalf("the heartbeat after the revoking answer came %v later; want at once (interval %v)", gap, nbInterval)
	}
	t.Logf("hand-off in %v", took)

	for _, r := range []*running{rb, ra} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}
