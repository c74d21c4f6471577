package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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
	t.Parallel()
	c := newTestCluster(t)
	r1 := startReplica(t, c, "r1", freeLoopbackPort(t))
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	owners := func() int64 {
		resp, err := cli.Get(context.Background(), c.prefix+"owners/", clientv3.WithPrefix(), clientv3.WithCountOnly())
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

// etcdRanges is how many range requests the etcd members have answered,
// from their metrics.
func etcdRanges(t *testing.T, c *testCluster) int {
	t.Helper()
	total := 0.0
	for _, m := range c.Members {
		resp, err := http.Get(m.ClientURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="Range"`) {
				fields := strings.Fields(line)
				v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
				if err != nil {
					t.Fatalf("etcd metric %q: %v", line, err)
				}
				total += v
			}
		}
	}
	return int(total)
}

// TestClusterRequestsWithoutGoodCredentialsReadNothing: requests about
// made-up streams placed on the replica they reach, without credentials
// or with a token no replica issued, are refused without an etcd read:
// routing them would read the stored streams to tell 404 from a stream
// whose owner just left, before the gateway looked at the credentials.
func TestClusterRequestsWithoutGoodCredentialsReadNothing(t *testing.T) {
	t.Parallel()
	c := newOwnTestCluster(t)
	r1 := startReplica(t, c, "r1", freeLoopbackPort(t))
	anonymous := coordtest.Remote(t, r1.url)
	forged := coordtest.Remote(t, r1.url).As("Bearer not-a-token")
	const requests = 200
	before := etcdRanges(t, c)
	start := time.Now()
	for i := range requests / 2 {
		for _, s := range []*coordtest.Server{anonymous, forged} {
			path := fmt.Sprintf("%s/streams/made-up-%d/groups/g", protocol.BasePath, i)
			if status, raw := s.Do(http.MethodGet, path, nil); status != http.StatusUnauthorized {
				t.Fatalf("GET %s: %d %s, want 401", path, status, raw)
			}
		}
	}
	reads := etcdRanges(t, c) - before
	t.Logf("%d etcd range requests in %v during %d refused requests", reads, time.Since(start), requests)
	// The replica's own rounds read a few times a second.
	if allowed := 10 + int(10*time.Since(start).Seconds()); reads > allowed {
		t.Fatalf("%d etcd range requests during %d requests without good credentials, want at most %d (the replica's own rounds)",
			reads, requests, allowed)
	}
}
