package memberit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
)

// TestMemberAuth runs members against a coordinator with member auth on:
// heartbeats need MEMBER (docs/protocol.md §4). A member with MEMBER
// credentials reads; one without never gets a shard.
func TestMemberAuth(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := srv.Client()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: testGroupConfig(),
		Auth: &coordtest.Auth{}})
	prefix := "authed"
	coord.CreateStream(prefix, 2)
	if err := redistest.CreateShards(context.Background(), rdb, prefix, 2, prefix); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, coord: coord, rdb: rdb, prefix: prefix, shards: 2}
	e.publish(0, 3, "a")
	e.publish(1, 3, "a")

	var anonymous atomic.Int64
	e.start("anon", func(ctx context.Context, msg *member.Message) error {
		anonymous.Add(1)
		return msg.Ack(ctx)
	})
	var authed atomic.Int64
	e.start("authed", func(ctx context.Context, msg *member.Message) error {
		authed.Add(1)
		return msg.Ack(ctx)
	}, member.WithBasicAuth(coordtest.UserMember, coordtest.Password(coordtest.UserMember)))
	eventually(t, 10*time.Second, "the member with credentials handles every record", func() bool { return authed.Load() == 6 })
	if n := anonymous.Load(); n != 0 {
		t.Fatalf("a member without credentials handled %d records", n)
	}
}
