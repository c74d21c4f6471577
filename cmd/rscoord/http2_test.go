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
	"github.com/rscoord/rscoord/internal/poll"
)

// TestBinaryHTTP2: HTTP/2 over cleartext is off by default and on with
// --http2, beside HTTP/1.1; SIGTERM releases a heartbeat held over it
// (RETRY at once) and the server stops cleanly.
func TestBinaryHTTP2(t *testing.T) {
	t.Parallel()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	h2c := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	off := startProcess(t, t.TempDir(), "--no-auth")
	if resp, err := h2c.Get(off.url + protocol.BasePath + "/streams"); err == nil {
		resp.Body.Close()
		t.Fatalf("HTTP/2 without --http2: %s over HTTP/%d, want a refused connection", resp.Status, resp.ProtoMajor)
	}
	if err := off.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	p := startProcess(t, t.TempDir(), "--no-auth", "--http2", "--http2-max-concurrent-streams", "50")
	s := coordtest.Remote(t, p.url) // HTTP/1.1
	s.CreateStream("orders", 2)
	m := coordtest.NewMember("m1", "orders", "orders")
	m.Beat(s)
	coordtest.Converge(t, s, 5, m)

	req := m.Request()
	req.WaitMs = 3000
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp  protocol.HeartbeatResponse
		proto int
		err   error
		at    time.Time
	}
	held := make(chan answer, 1)
	go func() {
		var a answer
		defer func() { a.at = time.Now(); held <- a }()
		resp, err := h2c.Post(p.url+protocol.BasePath+"/streams/orders/groups/orders/members/m1/heartbeat", "application/json", bytes.NewReader(raw))
		if err != nil {
			a.err = err
			return
		}
		defer resp.Body.Close()
		a.proto = resp.ProtoMajor
		a.err = json.NewDecoder(resp.Body).Decode(&a.resp)
	}()
	// SIGTERM once the heartbeat is held, not before: its RETRY at once is
	// what this checks.
	poll.UntilEvery(t, 20*time.Second, 20*time.Millisecond, func() bool {
		return gaugeValue(scrapeMetrics(t, s), metrics.HeldHeartbeats, nil) == 1
	}, "the heartbeat to be held")
	start := time.Now()
	if err := p.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := <-held
	if a.err != nil || a.proto != 2 || a.resp.Status != protocol.StatusRetry || a.at.Sub(start) > time.Second {
		t.Fatalf("held heartbeat over HTTP/2 at SIGTERM: %s over HTTP/%d after %v (%v), want RETRY at once", a.resp.Status, a.proto, a.at.Sub(start), a.err)
	}
	if err := p.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("stop with a held heartbeat over HTTP/2: %v\n%s", err, p.output())
	}
}
