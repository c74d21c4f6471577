package memberit_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestNoStarvation: one member with one worker and six shards full of
// records rotates over the shards record by record: every shard is served
// early, none waits for another's batch.
func TestNoStarvation(t *testing.T) {
	t.Parallel()
	const shards, perShard = 6, 40
	e := newEnv(t, "starve", shards)
	for i := range shards {
		e.publish(i, perShard, "s")
	}
	rec := &recorder{}
	r := e.start("rs-starve", func(ctx context.Context, m *member.Message) error {
		rec.add(m)
		poll.Hold(ctx, time.Millisecond) // a millisecond of work
		return m.Ack(ctx)
	}, member.WithMaxWorkers(1), member.WithBatch(32))
	eventually(t, 20*time.Second, "every record handled", func() bool { return rec.distinct() == shards*perShard })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	got := rec.all()
	first := map[int]bool{}
	for _, h := range got[:60] {
		first[h.shard] = true
	}
	if len(first) != shards {
		order := make([]int, 60)
		for i, h := range got[:60] {
			order[i] = h.shard
		}
		t.Fatalf("the first 60 records came from shards %v only (order %v): shards starved", first, order)
	}
	for i := range shards {
		if p := e.pending(i); p != 0 {
			t.Fatalf("shard %d: %d pending", i, p)
		}
	}
}

// ownership records, from the hooks and the handlers of several members,
// when each member read each shard.
type ownership struct {
	mu        sync.Mutex
	intervals map[int][]*interval // by shard
	calls     []call
}

type interval struct {
	member     string
	start, end time.Time // end zero: still owned
}

type call struct {
	member     string
	shard      int
	start, end time.Time
}

func newOwnership() *ownership { return &ownership{intervals: map[int][]*interval{}} }

func (o *ownership) assigned(ctx context.Context, shards []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for _, s := range shards {
		o.intervals[s] = append(o.intervals[s], &interval{member: member.MemberID(ctx), start: now})
	}
}

func (o *ownership) revoked(ctx context.Context, shards []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	id := member.MemberID(ctx)
	for _, s := range shards {
		for _, iv := range o.intervals[s] {
			if iv.member == id && iv.end.IsZero() {
				iv.end = now
			}
		}
	}
}

func (o *ownership) handled(m *member.Message, start time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call{member: m.MemberID, shard: m.Shard, start: start, end: time.Now()})
}

// handledSince reports whether each of members started handling a record
// at or after since.
func (o *ownership) handledSince(since time.Time, members ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range members {
		if !slices.ContainsFunc(o.calls, func(c call) bool { return c.member == m && !c.start.Before(since) }) {
			return false
		}
	}
	return true
}

// owners maps every shard currently owned to its owner.
func (o *ownership) owners() map[int]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[int]string{}
	for s, ivs := range o.intervals {
		for _, iv := range ivs {
			if iv.end.IsZero() {
				out[s] = iv.member
			}
		}
	}
	return out
}

// owns reports whether each listed member owns at least one shard and the
// listed members own all n shards between them.
func (o *ownership) covers(n int, members ...string) bool {
	owners := o.owners()
	if len(owners) != n {
		return false
	}
	count := map[string]int{}
	for _, m := range owners {
		count[m]++
	}
	for _, m := range members {
		if count[m] == 0 {
			return false
		}
	}
	return len(count) == len(members)
}

// check fails the test if two members owned one shard at overlapping times
// or a handler ran outside its member's ownership of the shard.
func (o *ownership) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	far := time.Now().Add(time.Hour)
	for s, ivs := range o.intervals {
		sorted := append([]*interval(nil), ivs...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].start.Before(sorted[j].start) })
		for i := 1; i < len(sorted); i++ {
			prev, cur := sorted[i-1], sorted[i]
			end := prev.end
			if end.IsZero() {
				end = far
			}
			if end.After(cur.start) {
				t.Errorf("shard %d: %s owned it until %v, %s from %v: overlap of %v",
					s, prev.member, prev.end.Format(time.StampMicro), cur.member, cur.start.Format(time.StampMicro), end.Sub(cur.start))
			}
		}
	}
	for _, c := range o.calls {
		inside := false
		for _, iv := range o.intervals[c.shard] {
			end := iv.end
			if end.IsZero() {
				end = far
			}
			if iv.member == c.member && !c.start.Before(iv.start) && !c.end.After(end) {
				inside = true
				break
			}
		}
		if !inside {
			t.Errorf("%s handled a record of shard %d at %v outside its ownership", c.member, c.shard, c.start.Format(time.StampMicro))
		}
	}
}

// TestNoOverlapWhileMembersComeAndGo: two members share eight shards while
// records keep coming; a third joins, then one leaves gracefully. No shard
// is ever read by two members at overlapping times, no handler runs outside
// its member's ownership, and every record is handled.
func TestNoOverlapWhileMembersComeAndGo(t *testing.T) {
	t.Parallel()
	const shards = 8
	e := newEnv(t, "overlap", shards)
	own := newOwnership()
	rec := &recorder{}
	handler := func(ctx context.Context, m *member.Message) error {
		start := time.Now()
		rec.add(m)
		poll.Hold(ctx, 2*time.Millisecond) // two milliseconds of work
		own.handled(m, start)
		return m.Ack(ctx)
	}
	opts := []member.Opt{member.WithOnAssigned(own.assigned), member.WithOnRevoked(own.revoked), member.WithMaxWorkers(2)}
	a := e.start("rs-a", handler, opts...)
	e.start("rs-b", handler, opts...)
	eventually(t, 10*time.Second, "a and b share the shards", func() bool { return own.covers(shards, "rs-a-m0", "rs-b-m0") })

	// Publish to every shard in the background.
	pubCtx, stopPub := context.WithCancel(context.Background())
	published := make(chan int, 1)
	go func() {
		n := 0
		defer func() { published <- n }()
		// A round to every shard each 5 ms.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for pubCtx.Err() == nil {
			for i := range shards {
				if err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{
					Stream: e.key(i), Values: map[string]any{"eventId": fmt.Sprintf("o-%d", n)},
				}).Err(); err == nil {
					n++
				}
			}
			select {
			case <-tick.C:
			case <-pubCtx.Done():
			}
		}
	}()
	t.Cleanup(stopPub)

	e.start("rs-c", handler, opts...)
	eventually(t, 10*time.Second, "c takes its share", func() bool { return own.covers(shards, "rs-a-m0", "rs-b-m0", "rs-c-m0") })
	since := time.Now()
	eventually(t, 10*time.Second, "a, b and c each handling records", func() bool { return own.handledSince(since, "rs-a-m0", "rs-b-m0", "rs-c-m0") })
	if err := a.stop(t); err != nil {
		t.Fatalf("a's Run: %v", err)
	}
	eventually(t, 10*time.Second, "b and c own everything", func() bool { return own.covers(shards, "rs-b-m0", "rs-c-m0") })
	since = time.Now()
	eventually(t, 10*time.Second, "b and c each handling records", func() bool { return own.handledSince(since, "rs-b-m0", "rs-c-m0") })
	stopPub()
	total := <-published
	eventually(t, 15*time.Second, "every record handled", func() bool { return rec.distinct() == total })
	for i := range shards {
		eventually(t, 5*time.Second, "nothing pending", func() bool { return e.pending(i) == 0 })
	}
	own.check(t)
	t.Logf("%d records, %d handler calls", total, rec.count())
}
