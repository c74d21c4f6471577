package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// serveHTTP serves the gateway of s through gateway.NewHTTPServer with
// limits on a loopback port of its own; stop shuts it down gracefully
// (the test calls it, or the cleanup does).
func serveHTTP(t *testing.T, s *coordtest.Server, limits gateway.HTTPLimits) (url string, srv *gateway.HTTPServer, stop func(context.Context) error) {
	t.Helper()
	srv = gateway.NewHTTPServer(s.Handler(), limits, quietLog(), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	stopped := false
	stop = func(ctx context.Context) error {
		if stopped {
			return nil
		}
		stopped = true
		err := srv.Shutdown(ctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
	t.Cleanup(func() {
		_ = srv.Close()
		if err := stop(context.Background()); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), srv, stop
}

// h2cClient speaks HTTP/2 over cleartext (prior knowledge) only: every
// request it sends shares one connection.
func h2cClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// http1Client speaks HTTP/1.1, a connection of its own per request in
// flight.
func http1Client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// postVia sends a heartbeat of m (waitMs wait) through c from another
// goroutine and says which protocol answered.
func postVia(c *http.Client, url, authorization string, m *coordtest.Member, req protocol.HeartbeatRequest) <-chan heldAnswer {
	out := make(chan heldAnswer, 1)
	go func() {
		var a heldAnswer
		defer func() { a.at = time.Now(); out <- a }()
		raw, err := json.Marshal(req)
		if err != nil {
			a.err = err
			return
		}
		hr, err := http.NewRequest(http.MethodPost, url+heartbeatPathOf(m), bytes.NewReader(raw))
		if err != nil {
			a.err = err
			return
		}
		if authorization != "" {
			hr.Header.Set("Authorization", authorization)
		}
		resp, err := c.Do(hr)
		if err != nil {
			a.err = err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != protoOf(c) {
			body, _ := io.ReadAll(resp.Body)
			a.err = fmt.Errorf("status %d over HTTP/%d: %s", resp.StatusCode, resp.ProtoMajor, body)
			return
		}
		a.err = json.NewDecoder(resp.Body).Decode(&a.resp)
	}()
	return out
}

func heartbeatPathOf(m *coordtest.Member) string {
	return base + "/streams/" + m.Prefix + "/groups/" + m.Group + "/members/" + m.ID + "/heartbeat"
}

// protoOf is the HTTP major version c speaks.
func protoOf(c *http.Client) int {
	if tr, ok := c.Transport.(*http.Transport); ok && tr.Protocols != nil && tr.Protocols.UnencryptedHTTP2() {
		return 2
	}
	return 1
}

// idsOf are the ids of ms.
func idsOf(ms []*coordtest.Member) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// settledMembers are n members that converged on one stream of 2n shards.
func settledMembers(t *testing.T, s *coordtest.Server, n int) []*coordtest.Member {
	t.Helper()
	s.CreateStream("orders", 2*n)
	var ms []*coordtest.Member
	for i := range n {
		m := coordtest.NewMember(fmt.Sprintf("m%d", i), "orders", "orders")
		m.Beat(s)
		ms = append(ms, m)
	}
	coordtest.Converge(t, s, 10, ms...)
	return ms
}

// Held heartbeats of several members share one HTTP/2 connection, each is
// answered after its waitMs although that is past the server's write
// timeout, and HTTP/1.1 keeps working on the same listener.
func TestHTTP2HeldHeartbeatsShareOneConnectionPastTheWriteTimeout(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	ms := settledMembers(t, s, 3)
	url, srv, _ := serveHTTP(t, s, gateway.HTTPLimits{HTTP2: true, WriteTimeout: 500 * time.Millisecond})
	c := h2cClient(t)
	// Requests sent at once before any connection is up may each dial
	// one; the connection opened first is the one the held ones share.
	warm, err := c.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	warm.Body.Close()

	before := lastHeartbeats(t, s, "orders", "orders", idsOf(ms)...)
	start := time.Now()
	var answers []<-chan heldAnswer
	reqs := make([]protocol.HeartbeatRequest, len(ms))
	for i, m := range ms {
		reqs[i] = m.Request()
		reqs[i].WaitMs = 1500
		answers = append(answers, postVia(c, url, "", m, reqs[i]))
	}
	awaitTaken(t, s, "orders", "orders", before)
	if open, held := srv.OpenConnections(), srv.HeldConnections(); open != 1 || held != 1 {
		t.Fatalf("%d held heartbeats over HTTP/2: %d connections open, %d busy with held answers; want 1 and 1", len(ms), open, held)
	}
	for i, ch := range answers {
		got := wait(t, ch, 5*time.Second)
		if took := got.at.Sub(start); took < 1400*time.Millisecond || took > 3*time.Second {
			t.Errorf("member %d answered after %v over HTTP/2, want its waitMs 1.5s", i, took)
		}
		if got.resp.Status != protocol.StatusOK {
			t.Errorf("member %d: %s", i, got.resp.Status)
		}
		ms[i].Apply(reqs[i], got.resp)
	}
	if held := srv.HeldConnections(); held != 0 {
		t.Fatalf("%d connections still counted busy with held answers after every answer", held)
	}

	// HTTP/1.1 on the same listener: held past the write timeout too.
	req := ms[0].Request()
	req.WaitMs = 1000
	start = time.Now()
	got := wait(t, postVia(http1Client(t), url, "", ms[0], req), 5*time.Second)
	if took := got.at.Sub(start); took < 900*time.Millisecond || got.resp.Status != protocol.StatusOK {
		t.Fatalf("held heartbeat over HTTP/1.1: %s after %v, want OK after 1s", got.resp.Status, took)
	}
}

// Connections busy with held answers are bounded whatever the protocol:
// one HTTP/2 connection carries several held answers and counts once; a
// held heartbeat that would make one connection too many is answered at
// once.
func TestHeldAnswersPinAtMostMaxHeldConnections(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	ms := settledMembers(t, s, 3)
	url, srv, _ := serveHTTP(t, s, gateway.HTTPLimits{HTTP2: true, MaxHeldConnections: 1})

	h2 := h2cClient(t)
	before := lastHeartbeats(t, s, "orders", "orders", idsOf(ms[:2])...)
	var held []<-chan heldAnswer
	for _, m := range ms[:2] {
		req := m.Request()
		req.WaitMs = 1500
		held = append(held, postVia(h2, url, "", m, req))
	}
	awaitTaken(t, s, "orders", "orders", before)
	if n := srv.HeldConnections(); n != 1 {
		t.Fatalf("two held answers on one HTTP/2 connection pin %d connections, want 1", n)
	}
	for _, c := range []*http.Client{http1Client(t), h2cClient(t)} {
		req := ms[2].Request()
		req.WaitMs = 1500
		start := time.Now()
		got := wait(t, postVia(c, url, "", ms[2], req), 5*time.Second)
		if took := got.at.Sub(start); took > 700*time.Millisecond || got.resp.Status != protocol.StatusOK {
			t.Fatalf("held heartbeat over HTTP/%d on a second connection: %s after %v, want OK at once", protoOf(c), got.resp.Status, took)
		}
		ms[2].Apply(req, got.resp)
	}
	for _, ch := range held {
		if got := wait(t, ch, 5*time.Second); got.resp.Status != protocol.StatusOK {
			t.Fatalf("held over HTTP/2: %s", got.resp.Status)
		}
	}
}

// Authentication, the header and body limits and the admin rate limit hold
// over HTTP/2 as over HTTP/1.1.
func TestHTTP2KeepsAuthAndLimits(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{
		Auth:    &coordtest.Auth{},
		Gateway: gateway.Options{AdminRateLimit: 1, AdminRateWindow: time.Hour},
	})
	s.CreateStream("orders", 2)
	url, _, _ := serveHTTP(t, s, gateway.HTTPLimits{HTTP2: true, MaxHeaderBytes: 8 << 10})
	c := h2cClient(t)
	send := func(method, path, body, authorization string, header map[string]string) (int, string, error) {
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s %s answered over HTTP/%d", method, path, resp.ProtoMajor)
		}
		return resp.StatusCode, string(raw), nil
	}
	member := coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember))
	writer := coordtest.Basic(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter))
	join := strings.Replace(joinBody, "%s", "m1", 1)
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"none", "", http.StatusUnauthorized},
		{"writer", writer, http.StatusForbidden},
		{"member", member, http.StatusOK},
	} {
		if status, raw, err := send(http.MethodPost, heartbeatPath("orders", "m1"), join, tc.authorization, nil); err != nil || status != tc.want {
			t.Errorf("heartbeat as %s over HTTP/2: %d %v, want %d: %s", tc.name, status, err, tc.want, raw)
		}
	}
	// A body past the heartbeat limit: 413.
	big := `{"pad":"` + strings.Repeat("x", gateway.MaxHeartbeatBodyBytes) + `"}`
	if status, raw, err := send(http.MethodPost, heartbeatPath("orders", "m1"), big, member, nil); err != nil || status != http.StatusRequestEntityTooLarge {
		t.Errorf("heartbeat of %d bytes over HTTP/2: %d %v, want 413: %.200s", len(big), status, err, raw)
	}
	// Headers past MaxHeaderBytes never reach a handler: the client
	// refuses to send them (the server advertised its limit) or the server
	// answers 431.
	if status, _, err := send(http.MethodGet, base+"/streams", "", writer, map[string]string{"X-Pad": strings.Repeat("y", 16<<10)}); err == nil && status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers over HTTP/2: %d, want 431 or a refusal", status)
	}
	// The admin rate limit: one mutation of the group an hour.
	scale := `{"targetShardCount":4,"requestedBy":"ops","reason":"r"}`
	if status, raw, err := send(http.MethodPost, base+"/streams/orders/groups/orders/scale", scale, writer, nil); err != nil || status != http.StatusAccepted {
		t.Fatalf("first scale over HTTP/2: %d %v %s", status, err, raw)
	}
	if status, raw, err := send(http.MethodPost, base+"/streams/orders/groups/orders/scale", scale, writer, nil); err != nil || status != http.StatusTooManyRequests {
		t.Errorf("second scale over HTTP/2: %d %v, want 429: %s", status, err, raw)
	}
}

// A graceful shutdown releases held answers over HTTP/2 (RETRY at once)
// and ends within its bound once they are written.
func TestHTTP2ShutdownReleasesHeldAnswers(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	ms := settledMembers(t, s, 2)
	url, _, stop := serveHTTP(t, s, gateway.HTTPLimits{HTTP2: true})
	c := h2cClient(t)
	before := lastHeartbeats(t, s, "orders", "orders", idsOf(ms)...)
	var held []<-chan heldAnswer
	for _, m := range ms {
		req := m.Request()
		req.WaitMs = 3000
		held = append(held, postVia(c, url, "", m, req))
	}
	awaitTaken(t, s, "orders", "orders", before)

	start := time.Now()
	s.Coord.BeginShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- stop(ctx) }()
	for i, ch := range held {
		got := wait(t, ch, 2*time.Second)
		if got.resp.Status != protocol.StatusRetry || got.at.Sub(start) > 500*time.Millisecond {
			t.Errorf("held heartbeat %d at shutdown: %s after %v, want RETRY at once", i, got.resp.Status, got.at.Sub(start))
		}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("graceful shutdown with held answers over HTTP/2: %v after %v", err, time.Since(start))
	}
}

// readSizes is a listener whose connections record how many bytes each of
// their reads asked for.
type readSizes struct {
	net.Listener
	mu    sync.Mutex
	sizes []int
}

func (l *readSizes) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sizedConn{Conn: c, l: l}, nil
}

func (l *readSizes) asked() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sizes)
}

type sizedConn struct {
	net.Conn
	l *readSizes
}

func (c *sizedConn) Read(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.sizes = append(c.l.sizes, len(p))
	c.l.mu.Unlock()
	return c.Conn.Read(p)
}

// The HTTP/2 server reads an h2c connection through a buffer, not a frame
// header (9 bytes) and a payload at a time: after the client preface,
// which net/http reads, no read of the connection asks for less than a
// buffer.
func TestHTTP2ReadsThroughABuffer(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	ms := settledMembers(t, s, 2)
	srv := gateway.NewHTTPServer(s.Handler(), gateway.HTTPLimits{HTTP2: true}, quietLog(), nil)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &readSizes{Listener: inner}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	c := h2cClient(t)
	url := "http://" + ln.Addr().String()
	for range 3 {
		for _, m := range ms {
			req := m.Request()
			a := wait(t, postVia(c, url, "", m, req), 5*time.Second)
			if a.err != nil || a.resp.Status != protocol.StatusOK {
				t.Fatalf("heartbeat over HTTP/2: %v %s", a.err, a.resp.Status)
			}
			m.Apply(req, a.resp)
		}
	}
	const preface = len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	sizes := ln.asked()
	read := 0
	for i, n := range sizes {
		if read >= preface && n < 4<<10 {
			t.Fatalf("read %d of the connection asked for %d bytes, after the preface (all: %v)", i, n, sizes)
		}
		read += min(n, preface) // net/http reads the preface in reads no larger than it
	}
	if read < preface || len(sizes) < 2 {
		t.Fatalf("reads %v: the preface and the frames after it", sizes)
	}
}
