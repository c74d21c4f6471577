package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
)

// TestStreamCreateFinishedByItsRepeat: a create whose default group cannot
// be provisioned in Redis (here a shard key that is not a stream) keeps the
// stream but not the group, and answers that the request should be
// repeated; once Redis can take it, the same request finishes the create
// (201 with the stream), a repeat asking for another shard count is refused,
// and a repeat of a finished create is 409 as before.
func TestStreamCreateFinishedByItsRepeat(t *testing.T) {
	rs := redistest.Standalone(t)
	c := startOnRedis(t, rs, false)
	ctx := context.Background()
	if err := rs.Client().Set(ctx, "wt:1", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	four, five := 4, 5
	create := protocol.CreateRequest{InitialShardCount: &four, RequestedBy: "test"}
	code := func(err error) protocol.ErrorCode {
		var perr *protocol.Error
		if errors.As(err, &perr) {
			return perr.Code
		}
		return ""
	}

	_, err := c.CreateStream(ctx, "wt", create)
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.CodeRedisStreamProvisioningFailed ||
		!strings.Contains(perr.Message, "WRONGTYPE") || !strings.Contains(perr.Message, "repeat the request") {
		t.Fatalf("create with a shard key that is not a stream: %v, want %s saying what Redis refused", err, protocol.CodeRedisStreamProvisioningFailed)
	}
	if _, err := c.Group(ctx, "wt", "wt"); code(err) != protocol.CodeGroupNotFound {
		t.Fatalf("the default group after the failed create: %v", err)
	}
	if err := rs.Client().Del(ctx, "wt:1").Err(); err != nil {
		t.Fatal(err)
	}

	if _, err := c.CreateStream(ctx, "wt", protocol.CreateRequest{InitialShardCount: &five, RequestedBy: "test"}); code(err) != protocol.CodeStreamPrefixAlreadyExists {
		t.Fatalf("a repeat asking for 5 shards of the 4-shard stream: %v", err)
	}
	resp, err := c.CreateStream(ctx, "wt", create)
	if err != nil {
		t.Fatalf("the same create again, Redis fixed: %v", err)
	}
	if resp.StreamPrefix != "wt" || resp.ShardCount != 4 || resp.MetadataVersion != 1 {
		t.Fatalf("finished create answered %+v", resp)
	}
	g, err := c.Group(ctx, "wt", "wt")
	if err != nil || g.ShardCount != 4 {
		t.Fatalf("the default group after the repeat: %+v, %v", g, err)
	}
	for i := range 4 {
		groups, err := rs.Client().XInfoGroups(ctx, fmt.Sprintf("wt:%d", i)).Result()
		if err != nil || len(groups) != 1 || groups[0].Name != "wt" {
			t.Fatalf("shard wt:%d: consumer groups %+v, %v", i, groups, err)
		}
	}
	if _, err := c.CreateStream(ctx, "wt", create); code(err) != protocol.CodeStreamPrefixAlreadyExists {
		t.Fatalf("a repeat of the finished create: %v", err)
	}
}
