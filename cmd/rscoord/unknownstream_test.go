package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// TestClusterUnknownStreamsAreNotClaimed: a request about a stream the
// store does not hold makes no owner key (an etcd write, kept for seconds),
// whoever sends it, even before its credentials are checked; it is
// answered as about a stream that does not exist. Only the request that
// creates a stream claims its name.
func TestClusterUnknownStreamsAreNotClaimed(t *testing.T) {
	c := newTestCluster(t)
	r1 := startReplica(t, c, "r1", freeLoopbackPort(t))
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	owners := func() int64 {
		resp, err := cli.Get(context.Background(), "/rscoord/owners/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	anonymous := coordtest.Remote(t, r1.url)
	admin, member := asAdmin(t, r1.url), asMember(t, r1.url)
	for i := range 20 {
		prefix := fmt.Sprintf("nothing-%d", i)
		if status, raw := anonymous.Do(http.MethodGet, protocol.BasePath+"/streams/"+prefix+"/groups/g", nil); status != http.StatusUnauthorized {
			t.Fatalf("anonymous GET of stream %s: %d %s, want 401", prefix, status, raw)
		}
	}
	if status, raw := admin.Do(http.MethodGet, protocol.BasePath+"/streams/nothing/groups/nothing", nil); status != http.StatusNotFound {
		t.Fatalf("GET of a stream nobody created: %d %s, want 404", status, raw)
	}
	m := coordtest.NewMember("m", "nothing", "nothing")
	if resp, err := tryBeat(member, m); err != nil || resp.Status != protocol.StatusUnknownMemberID || resp.ErrorCode != protocol.CodeStreamNotFound {
		t.Fatalf("heartbeat on a stream nobody created: %s %s (%v), want UNKNOWN_MEMBER_ID with STREAM_NOT_FOUND", resp.Status, resp.ErrorCode, err)
	}
	if n := owners(); n != 0 {
		t.Fatalf("%d owner keys after requests about streams that do not exist, want 0", n)
	}
	admin.CreateStream("orders", 2)
	if n := owners(); n != 1 {
		t.Fatalf("%d owner keys after a stream was created, want 1", n)
	}
	o := coordtest.NewMember("o", "orders", "orders")
	coordtest.Converge(t, member, 5, o)
}
