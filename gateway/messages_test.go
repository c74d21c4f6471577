package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/redisops"
)

func TestMessagesPageThroughAShard(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb)})
	s.CreateStream("orders", 2)
	var ids []string
	for i := range 7 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:1", Values: []any{"n", fmt.Sprint(i)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	path := base + "/monitoring/streams/orders/groups/orders/shards/1/messages"

	// Forward in pages of 3: 3, 3, 1, then no cursor.
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		var m protocol.MessagesResponse
		s.JSON(http.MethodGet, path+"?limit=3&cursor="+cursor, nil, http.StatusOK, &m)
		for _, msg := range m.Messages {
			got = append(got, msg.ID)
		}
		if m.NextCursor == nil {
			break
		}
		cursor = *m.NextCursor
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("forward pages = %v, want %v", got, ids)
	}
	var back protocol.MessagesResponse
	s.JSON(http.MethodGet, path+"?limit=2&direction=backward", nil, http.StatusOK, &back)
	if len(back.Messages) != 2 || back.Messages[0].ID != ids[6] || back.Messages[0].Fields["n"] != "6" || *back.NextCursor != ids[5] {
		t.Fatalf("backward page = %+v", back)
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?direction=UP", "?cursor=0-0%20%2B", "?cursor=abc"} {
		status, raw := s.Do(http.MethodGet, path+bad, nil)
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", bad, status, raw)
		}
	}
	if status, _ := s.Do(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/shards/2/messages", nil); status != http.StatusBadRequest {
		t.Errorf("a shard outside the stream: %d", status)
	}

	var rows []gateway.GrafanaMessageRow
	s.JSON(http.MethodGet, base+"/monitoring/grafana/messages?streamPrefix=orders&shard=1&limit=3", nil, http.StatusOK, &rows)
	if len(rows) != 3 || rows[0].ID != ids[6] || rows[0].StreamKey != "orders:1" {
		t.Fatalf("grafana messages = %+v", rows)
	}
	var shards []gateway.GrafanaShardRow
	s.JSON(http.MethodGet, base+"/monitoring/grafana/shards?streamPrefix=orders", nil, http.StatusOK, &shards)
	if len(shards) != 2 || shards[1].Length != 7 || shards[1].StreamKey != "orders:1" {
		t.Fatalf("grafana shards = %+v", shards)
	}
}

// TestMessagesWithoutRedis: the reads of shard streams on a coordinator
// without --redis are 503 REDIS_NOT_CONFIGURED, with no Retry-After: no
// retry mends a missing flag.
func TestMessagesWithoutRedis(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	for _, path := range []string{
		base + "/monitoring/streams/orders/groups/orders/shards/0/messages",
		base + "/monitoring/streams/orders/groups/orders/shards",
	} {
		status, hdr, raw := send(t, s.URL, http.MethodGet, path, "", "")
		if status != http.StatusServiceUnavailable || !contains(raw, protocol.CodeRedisNotConfigured) {
			t.Fatalf("%s without redis: %d %s", path, status, raw)
		}
		if after := hdr.Get("Retry-After"); after != "" {
			t.Errorf("%s without redis: Retry-After %s, want none", path, after)
		}
	}
}
