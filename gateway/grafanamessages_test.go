package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/redisops"
)

// TestGrafanaMessagesMergeShardsPageAndFind pages through every shard
// merged by id (newest first), jumps to the last page with a tail cursor,
// and finds one entry by id, as the reference design's message explorer
// does.
func TestGrafanaMessagesMergeShardsPageAndFind(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb)})
	s.CreateStream("orders", 3)
	var ids []string
	for i := range 7 {
		// Ids distinct across shards, so that the merged order is theirs.
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: fmt.Sprintf("orders:%d", i%3), ID: fmt.Sprintf("%d-1", 1000+i),
			Values: []any{"payload", fmt.Sprint(i)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	page := func(query string) []gateway.GrafanaMessageRow {
		t.Helper()
		var rows []gateway.GrafanaMessageRow
		s.JSON(http.MethodGet, base+"/monitoring/grafana/messages?streamPrefix=orders&"+query, nil, http.StatusOK, &rows)
		return rows
	}

	var got []string
	cursor := ""
	for range 10 {
		rows := page("shardIndex=all&limit=3&cursor=" + url.QueryEscape(cursor))
		for _, r := range rows {
			got = append(got, r.RecordID)
			if r.PageTotalMessages != 7 || r.PageLimit != 3 || r.ShardLabel != fmt.Sprintf(":%d", r.ShardIndex) {
				t.Fatalf("row %+v", r)
			}
		}
		if len(rows) == 0 || rows[0].PageNextCursor == nil {
			break
		}
		cursor = *rows[0].PageNextCursor
	}
	if fmt.Sprint(got) != fmt.Sprint(newest) {
		t.Fatalf("merged pages = %v, want %v", got, newest)
	}

	last := page("shardIndex=all&limit=3&cursor=__rsc_tail__:0")
	if len(last) != 1 || last[0].RecordID != ids[0] || last[0].PageNextCursor != nil {
		t.Fatalf("last page = %+v, want the oldest entry alone", last)
	}
	before := page("shardIndex=all&limit=3&cursor=__rsc_tail__:1")
	if len(before) != 3 || before[0].RecordID != ids[3] || before[0].PageNextCursor == nil || *before[0].PageNextCursor != "__rsc_tail__:0" {
		t.Fatalf("the page before the last = %+v", before)
	}

	found := page("recordId=" + ids[4])
	if len(found) != 1 || found[0].ShardIndex != 1 || found[0].Payload == nil || *found[0].Payload != "4" || found[0].FieldsJSON != `{"payload":"4"}` {
		t.Fatalf("record search = %+v", found)
	}
	if rows := page("shardIndex=2&direction=FORWARD"); len(rows) != 2 || rows[0].RecordID != ids[2] || rows[1].RecordID != ids[5] {
		t.Fatalf("shard 2 forward = %+v", rows)
	}
	// A page size outside 1..1000 is clamped, as the reference design's
	// server does; Grafana's "All" values select every shard.
	if rows := page("shardIndex=all&limit=0"); len(rows) != 1 || rows[0].PageLimit != 1 || rows[0].RecordID != newest[0] {
		t.Fatalf("limit=0 = %+v, want one row of pageLimit 1", rows)
	}
	if rows := page("shardIndex=all&limit=5000"); len(rows) != 7 || rows[0].PageLimit != 1000 {
		t.Fatalf("limit=5000 = %+v, want every row, pageLimit 1000", rows)
	}
	for _, all := range []string{".*", "$__all", "__all", "ALL"} {
		if rows := page("limit=7&shardIndex=" + url.QueryEscape(all)); len(rows) != 7 {
			t.Errorf("shardIndex=%s: %d rows, want 7 (every shard)", all, len(rows))
		}
	}
	for _, bad := range []string{"shardIndex=x", "shardIndex=9", "direction=UP", "limit=x", "limit=99999999999999999999", "recordId=abc", "cursor=zz&shardIndex=all", "cursor=__rsc_tail__:-1"} {
		if status, raw := s.Do(http.MethodGet, base+"/monitoring/grafana/messages?streamPrefix=orders&"+bad, nil); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", bad, status, raw)
		}
	}
}
