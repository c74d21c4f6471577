package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/internal/poll"
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

// Message cursors Redis would refuse are the client's mistake (400), and
// cursors at either end of the id space answer an empty page, never 500.
func TestMessageCursors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb)})
	s.CreateStream("orders", 2)
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"n", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	path := base + "/monitoring/streams/orders/groups/orders/shards/0/messages"
	for _, bad := range []string{
		"?cursor=18446744073709551616-0", // one past 64 bits
		"?cursor=0-18446744073709551616",
		"?cursor=99999999999999999999-0",
		"?cursor=-1-0", "?cursor=1-", "?cursor=-", "?cursor=%2B5-1", "?cursor=1_0-0",
		"?limit=99999999999999999999", "?limit=-3", "?limit=x",
	} {
		status, raw := s.Do(http.MethodGet, path+bad, nil)
		if status != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d %s, want 400", bad, status, raw)
		}
		errorBody(t, bad, raw, protocol.CodeInvalidRequest)
	}
	if status, raw := s.Do(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/shards/99999999999999999999/messages", nil); status != http.StatusBadRequest {
		t.Errorf("a shard index past int: HTTP %d %s", status, raw)
	}
	for _, edge := range []string{
		"?cursor=18446744073709551615-18446744073709551615",
		"?cursor=0-0&direction=BACKWARD",
		"?cursor=00-000&direction=backward",
	} {
		var page protocol.MessagesResponse
		s.JSON(http.MethodGet, path+edge, nil, http.StatusOK, &page)
		if len(page.Messages) != 0 || page.NextCursor != nil {
			t.Errorf("%s: want an empty last page, got %+v", edge, page)
		}
	}
}

// Redis down (or refusing) on a route that reads it answers 503
// REDIS_UNAVAILABLE with Retry-After, not 500; it comes back by itself.
func TestRedisDownAnswers503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Standalone(t)
	rdb := srv.Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb)})
	s.CreateStream("orders", 2)
	g := base + "/monitoring/streams/orders/groups/orders"
	paths := []string{g + "/shards", g + "/offsets", g + "/shards/0/messages",
		base + "/monitoring/grafana/shards?streamPrefix=orders", base + "/monitoring/grafana/messages?streamPrefix=orders&shard=0"}
	// says is what the message must hold: a refusal, which waiting does
	// not mend, names the key and what Redis said.
	check503 := func(what string, says ...string) {
		t.Helper()
		for _, p := range paths {
			status, hdr, raw := send(t, s.URL, http.MethodGet, p, "", "")
			if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
				t.Errorf("%s: %s: HTTP %d Retry-After %q: %s", what, p, status, hdr.Get("Retry-After"), raw)
			}
			errorBody(t, what+" "+p, raw, protocol.CodeRedisUnavailable)
			for _, want := range says {
				if !strings.Contains(string(raw), want) {
					t.Errorf("%s: %s: the message does not say %q: %s", what, p, want, raw)
				}
			}
		}
	}

	// Refusing: the shard key holds something that is not a stream.
	if err := rdb.Del(ctx, "orders:0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "orders:0", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	check503("WRONGTYPE", "Redis refused the read of orders:0", "WRONGTYPE")
	if err := rdb.Del(ctx, "orders:0").Err(); err != nil {
		t.Fatal(err)
	}

	// Kill keeps the client, which reconnects once Redis is back.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	check503("Redis stopped", "retry later")
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// go-redis backs off redialing a server that refused it: give the
	// client a few seconds to find Redis again.
	for _, p := range paths {
		var status int
		var raw []byte
		if !poll.Soon(20*time.Second, func() bool {
			status, raw = s.Do(http.MethodGet, p, nil)
			if status != http.StatusOK && status != http.StatusServiceUnavailable {
				t.Fatalf("Redis back: %s: HTTP %d %s", p, status, raw)
			}
			return status == http.StatusOK
		}) {
			t.Fatalf("Redis back: %s: HTTP %d %s", p, status, raw)
		}
	}
}
