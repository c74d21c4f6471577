package member

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/redistest"
)

// TestDeletedPendingEntriesAckedOnlyWhileOwned: a pending entry whose
// record was deleted comes back without fields and is the one entry the
// runtime acknowledges itself (doc.go rule 10), but only while the member
// may acknowledge: a read whose answer arrives after a fence or after the
// lease lapsed leaves it pending, like every other record of that read.
func TestDeletedPendingEntriesAckedOnlyWhileOwned(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		end       func(tc *testCore, run *shardRun)
		wantAcked bool
	}{
		{"owned", func(*testCore, *shardRun) {}, true},
		{"lease lapsed", func(tc *testCore, _ *shardRun) { tc.lease.drop() }, false},
		{"fenced", func(_ *testCore, run *shardRun) { run.fence(ErrFenced) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := newTestCore(t, 1)
			core.rdb = rdb
			core.cfg = &config{stream: "del-" + tc.name, group: "g"}
			run := newShardRun(core.memberCore, 0, 1)
			if err := rdb.XGroupCreateMkStream(ctx, run.key, "g", "0").Err(); err != nil {
				t.Fatal(err)
			}
			id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: run.key, Values: []any{"f", "v"}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: core.id, Streams: []string{run.key, ">"}, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.XDel(ctx, run.key, id).Err(); err != nil {
				t.Fatal(err)
			}
			res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: core.id, Streams: []string{run.key, "0"}, Block: -1}).Result()
			if err != nil || len(res) != 1 || len(res[0].Messages) != 1 || res[0].Messages[0].Values != nil {
				t.Fatalf("own pending read = %v, %v; want the deleted entry without fields", res, err)
			}
			tc.end(core, run)
			if msgs, err := run.messages(ctx, res[0].Messages, true); err != nil || len(msgs) != 0 {
				t.Fatalf("messages = %v, %v; want none", msgs, err)
			}
			pending, err := rdb.XPending(ctx, run.key, "g").Result()
			if err != nil {
				t.Fatal(err)
			}
			if acked := pending.Count == 0; acked != tc.wantAcked {
				t.Fatalf("deleted entry acknowledged: %v, want %v", acked, tc.wantAcked)
			}
		})
	}
}
