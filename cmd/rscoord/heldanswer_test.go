package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// A replica answers a heartbeat with a decision only while its lease is
// certain at the moment of the answer, not only when the request came in:
// a heartbeat held (waitMs) by the owner, which is then frozen past its
// etcd lease while the other replica takes the stream over, is answered
// RETRY after the thaw, never OK. An OK sent then would let the member
// read for a lease counted from an answer later than the new owner's
// load, which counted every member's lease from the load.
func TestClusterHeldAnswerAfterLostLeaseIsRetry(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	// A write timeout under the hold: a held answer moves its own write
	// deadline, through the buffer the answer waits in.
	flags := []string{"--heartbeat-interval", "6s", "--http-write-timeout", "2s"}
	reps := map[string]*replicaProc{
		"r1": startReplica(t, c, "r1", freeLoopbackPort(t), flags...),
		"r2": startReplica(t, c, "r2", freeLoopbackPort(t), flags...),
	}
	other := map[string]string{"r1": "r2", "r2": "r1"}
	asAdmin(t, reps["r1"].url).CreateStream("orders", 4)
	owner := ownerOf(t, reps["r1"].url, "orders", "orders", "")
	frozen := reps[owner]
	a := coordtest.NewMember("a", "orders", "orders")
	coordtest.Converge(t, asMember(t, frozen.url), 6, a)

	type answer struct {
		hb     protocol.HeartbeatResponse
		status int
		err    error
	}
	// held sends a steady heartbeat of a asking to be held (nothing is new
	// for a) to the owner; its answer comes on the channel.
	held := func(req protocol.HeartbeatRequest) <-chan answer {
		answered := make(chan answer, 1)
		raw, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			url := frozen.url + protocol.BasePath + "/streams/orders/groups/orders/members/a/heartbeat"
			hreq, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
			if err != nil {
				answered <- answer{err: err}
				return
			}
			hreq.Header.Set("Content-Type", "application/json")
			hreq.Header.Set("Authorization", credtest.MemberAuth())
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(hreq)
			if err != nil {
				answered <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			var hb protocol.HeartbeatResponse
			err = json.NewDecoder(resp.Body).Decode(&hb)
			answered <- answer{hb: hb, status: resp.StatusCode, err: err}
		}()
		return answered
	}
	req := a.Request()
	req.WaitMs = 3000
	start := time.Now()
	if got := <-held(req); got.err != nil || got.hb.Status != protocol.StatusOK || time.Since(start) < 2*time.Second {
		t.Fatalf("a held heartbeat (3 s, write timeout 2 s) after %v: %+v", time.Since(start), got)
	} else {
		a.Apply(req, got.hb)
	}

	req = a.Request()
	req.WaitMs = 5000
	sent := time.Now()
	answered := held(req)
	// The owner counts the heartbeat it holds: then it is parked there.
	poll.UntilEvery(t, 20*time.Second, 50*time.Millisecond, func() bool {
		return gaugeValue(scrapeMetrics(t, asAdmin(t, frozen.url)), metrics.HeldHeartbeats, nil) == 1
	}, "a's heartbeat to be held at the owner")
	if err := frozen.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	// The other replica takes the stream over and loads it, while the
	// frozen one still holds a's heartbeat. (Asked through the monitoring
	// view: a heartbeat of a would be forwarded to the frozen owner until
	// its key lapses, and a second heartbeat of a releases the held one.)
	if took := ownerOf(t, reps[other[owner]].url, "orders", "orders", owner); took != other[owner] {
		t.Fatalf("the stream moved to %s", took)
	}
	// The hold ends while the owner is frozen: at the thaw its answer is
	// due at once. The duration is the point: a frozen process tells
	// nothing, so only the clock says the hold is over.
	time.Sleep(time.Until(sent.Add(time.Duration(req.WaitMs)*time.Millisecond + time.Second)))
	if err := frozen.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	got := <-answered
	if got.err != nil {
		t.Fatalf("the held heartbeat: %v", got.err)
	}
	if got.status != http.StatusOK || got.hb.Status != protocol.StatusRetry {
		t.Fatalf("the held heartbeat was answered %d %s after the owner lost its lease and %s took over; want RETRY: %+v",
			got.status, got.hb.Status, other[owner], got.hb)
	}
}
