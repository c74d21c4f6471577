package memberit_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/redisops"
)

// TestForcedResetRunsUnderLiveMembers: two members read four shards while
// records keep coming, and a forced offsets reset moves the group back to
// an id. The members hand the shards off, the reset lands (every record
// after the id is read again, none before it), no shard is read by two
// members at once, and both members own and read shards again after it.
func TestForcedResetRunsUnderLiveMembers(t *testing.T) {
	t.Parallel()
	const shards, pre = 4, 10
	rdb := redistest.Standalone(t).Client()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig(), Redis: redisops.Wrap(rdb)})
	coord.CreateStream("force", shards)
	e := &env{t: t, coord: coord, rdb: rdb, prefix: "force", shards: shards}
	ctx := context.Background()
	// Records 1000-0 … 1009-0 on every shard, older than any added later.
	for i := range shards {
		for j := range pre {
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.key(i), ID: strconv.Itoa(1000+j) + "-0",
				Values: map[string]any{"eventId": fmt.Sprintf("pre-%d-%d", i, j)}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	own := newOwnership()
	rec := &recorder{}
	handler := func(ctx context.Context, m *member.Message) error {
		start := time.Now()
		rec.add(m)
		poll.Hold(ctx, time.Millisecond)
		own.handled(m, start)
		return m.Ack(ctx)
	}
	opts := []member.Opt{member.WithOnAssigned(own.assigned), member.WithOnRevoked(own.revoked), member.WithMaxWorkers(2)}
	e.start("fr-a", handler, opts...)
	e.start("fr-b", handler, opts...)
	eventually(t, 10*time.Second, "a and b share the shards", func() bool { return own.covers(shards, "fr-a-m0", "fr-b-m0") })
	eventually(t, 10*time.Second, "the first records handled", func() bool { return rec.distinct() == shards*pre })
	for i := range shards {
		eventually(t, 5*time.Second, "the first records acknowledged", func() bool { return e.pending(i) == 0 })
	}

	// Records keep coming on every shard while the reset runs.
	pubCtx, stopPub := context.WithCancel(ctx)
	t.Cleanup(stopPub)
	published := make(chan int, 1)
	go func() {
		n := 0
		defer func() { published <- n }()
		for pubCtx.Err() == nil {
			for i := range shards {
				if rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.key(i), Values: map[string]any{"eventId": fmt.Sprintf("live-%d", n)}}).Err() == nil {
					n++
				}
			}
			poll.Hold(pubCtx, 5*time.Millisecond)
		}
	}()
	since := time.Now()
	eventually(t, 10*time.Second, "a and b handling records", func() bool { return own.handledSince(since, "fr-a-m0", "fr-b-m0") })

	var got protocol.OffsetsResetResponse
	start := time.Now()
	coord.JSON(http.MethodPost, coordclient.OffsetsResetPath("force", "force"), protocol.OffsetsResetRequest{
		RequestedBy: "test", Reason: "replay", To: protocol.ResetToID, ID: "1004-0", Execute: true, Force: true,
	}, http.StatusOK, &got)
	answered := time.Now()
	t.Logf("forced reset answered in %v", answered.Sub(start))
	if !got.Executed || !slices.Equal(got.HandedOff, []string{"fr-a-m0", "fr-b-m0"}) || len(got.Shards) != shards {
		t.Fatalf("forced reset = %+v, want executed on %d shards, a and b made to hand off", got, shards)
	}
	for _, s := range got.Shards {
		if s.NewLastDeliveredID != "1004-0" {
			t.Fatalf("shard %d reset to %s, want 1004-0", s.ShardIndex, s.NewLastDeliveredID)
		}
	}

	// Both members own and read shards again; the records after 1004-0
	// are read a second time, those up to it are not.
	eventually(t, 10*time.Second, "a and b own the shards again", func() bool { return own.covers(shards, "fr-a-m0", "fr-b-m0") })
	eventually(t, 10*time.Second, "a and b handling records after the reset", func() bool {
		return own.handledSince(answered, "fr-a-m0", "fr-b-m0")
	})
	eventually(t, 10*time.Second, "the records after 1004-0 read again", func() bool {
		for i := range shards {
			for j := 5; j < pre; j++ {
				if rec.times(fmt.Sprintf("pre-%d-%d", i, j)) < 2 {
					return false
				}
			}
		}
		return true
	})
	for i := range shards {
		for j := range 5 {
			if n := rec.times(fmt.Sprintf("pre-%d-%d", i, j)); n != 1 {
				t.Errorf("record pre-%d-%d handled %d times, want once: the reset went back too far", i, j, n)
			}
		}
	}
	stopPub()
	total := <-published
	eventually(t, 15*time.Second, "every record handled", func() bool { return rec.distinct() == shards*pre+total })
	own.check(t)
	own.mu.Lock()
	defer own.mu.Unlock()
	for s := range shards {
		if n := len(own.intervals[s]); n < 2 {
			t.Errorf("shard %d was owned %d times, want handed off and owned again", s, n)
		}
	}
}

// times is how often the record with eventID was handled.
func (r *recorder) times(eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.records {
		if h.eventID == eventID {
			n++
		}
	}
	return n
}
