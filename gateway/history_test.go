package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/redisops"
)

// TestHistoryFollowsRedis reads a group's history from a coordinator
// collecting from Redis every half second: entries added show in the
// length and lag, entries read and acknowledged in the acknowledgements
// per second, shard by shard and in the group's totals.
func TestHistoryFollowsRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Redis: redisops.Wrap(rdb), MetricsInterval: 500 * time.Millisecond})
	s.CreateStream("orders", 2)
	for i := range 5 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"n", fmt.Sprint(i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	path := base + "/monitoring/streams/orders/groups/orders/history"
	var h protocol.HistoryResponse
	last := func() protocol.HistorySample {
		s.JSON(http.MethodGet, path, nil, http.StatusOK, &h)
		if len(h.Group) == 0 {
			return protocol.HistorySample{}
		}
		return h.Group[len(h.Group)-1]
	}
	poll.Until(t, 20*time.Second, func() bool { l := last(); return l.Length == 5 && l.Lag != nil && *l.Lag == 5 },
		"a sample of the five entries added")
	if h.IntervalMs != 500 || h.WindowMs != 900*500 || !h.Tracked || len(h.Shards) != 2 {
		t.Fatalf("history %+v", h)
	}

	// Three read, two of them acknowledged: the lag falls by three, the
	// pending count rises by one.
	streams, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "c", Streams: []string{"orders:0", ">"}, Count: 3}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.XAck(ctx, "orders:0", "orders", streams[0].Messages[0].ID, streams[0].Messages[1].ID).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, func() bool { l := last(); return l.Lag != nil && *l.Lag == 2 }, "a sample after the reads")
	l := h.Group[len(h.Group)-1]
	if l.Pending != 1 || l.AcksPerSecond == nil || *l.AcksPerSecond <= 0 || l.AppendsPerSecond == nil || *l.AppendsPerSecond != 0 {
		t.Errorf("group sample after two acknowledgements: %+v", show(l))
	}
	shard0 := h.Shards[0].Samples[len(h.Shards[0].Samples)-1]
	if shard0.AcksPerSecond == nil || *shard0.AcksPerSecond != *l.AcksPerSecond {
		t.Errorf("shard 0's sample %+v, the group's %+v", show(shard0), show(l))
	}

	// A READ user may read a history; an unknown group is 404 like every
	// group route.
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("READ user: %d", resp.StatusCode)
	}
	if status, body := s.Do(http.MethodGet, base+"/monitoring/streams/orders/groups/nope/history", nil); status != http.StatusNotFound {
		t.Errorf("unknown group: %d %s", status, body)
	}
}

func show(s protocol.HistorySample) string {
	f := func(v *float64) any {
		if v == nil {
			return "null"
		}
		return *v
	}
	lag := any("null")
	if s.Lag != nil {
		lag = *s.Lag
	}
	return fmt.Sprintf("{at %v length %d pending %d lag %v appends/s %v acks/s %v}", s.At, s.Length, s.Pending, lag, f(s.AppendsPerSecond), f(s.AcksPerSecond))
}
