package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/internal/poll"
)

// serveLimited serves a coordinator (authentication off) through
// gateway.NewHTTPServer with limits, on a loopback port.
func serveLimited(t *testing.T, limits gateway.HTTPLimits, evicted func()) (addr string, srv *gateway.HTTPServer) {
	t.Helper()
	s := serveFake(t, newFake(), fakeOptions{})
	s.CreateStream("orders", 2)
	srv = gateway.NewHTTPServer(gateway.New(newFake(), gateway.Options{Logger: quietLog()}),
		limits, quietLog(), evicted)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), srv
}

// closedWithin reads c until the server closes it, failing when that takes
// longer than limit.
func closedWithin(t *testing.T, c net.Conn, limit time.Duration, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open past %v", what, limit)
	}
}

// TestSlowBodyAndIdleConnectionsAreClosed: with read and idle timeouts of
// 2 s, a body trickling for 5 s and an idle keep-alive connection are both
// closed by the server.
func TestSlowBodyAndIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	addr, _ := serveLimited(t, gateway.HTTPLimits{ReadTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second}, nil)

	trickle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer trickle.Close()
	fmt.Fprintf(trickle, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", heartbeatPath("orders", "m1"))
	// Trickle a byte every 250 ms for 5 s (or until the server is gone);
	// by then the 2 s read timeout has long passed.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for start := time.Now(); time.Since(start) < 5*time.Second; {
		<-tick.C
		if _, err := trickle.Write([]byte(" ")); err != nil {
			break
		}
	}
	closedWithin(t, trickle, time.Second, "trickling body")

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET %s/monitoring/health HTTP/1.1\r\nHost: x\r\n\r\n", base)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("first request: %d, close=%v", resp.StatusCode, resp.Close)
	}
	idleSince := time.Now()
	closedWithin(t, idle, 4*time.Second, "idle keep-alive connection")
	if d := time.Since(idleSince); d < time.Second {
		t.Fatalf("the idle connection was closed after %v, before the idle timeout", d)
	}
}

// raiseNoFile lifts the soft file descriptor limit to the hard one and
// fails the test when even that is below need.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < need {
		lim.Cur = min(lim.Max, need)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	if lim.Cur < need {
		t.Fatalf("this test needs %d file descriptors; the hard limit is %d (raise ulimit -Hn)", need, lim.Max)
	}
}

// TestIdleConnectionsDoNotStarveNewClients: 5,000 connections that never
// send a request do not keep a new client from being served within 1 s,
// and the server never holds more than its cap.
func TestIdleConnectionsDoNotStarveNewClients(t *testing.T) {
	// Not parallel: it bounds a wait from above.
	const idleConns, maxConns = 5000, 1000
	raiseNoFile(t, idleConns+maxConns+500)
	var evicted atomic.Int64
	addr, srv := serveLimited(t, gateway.HTTPLimits{MaxConnections: maxConns}, func() { evicted.Add(1) })
	conns := make([]net.Conn, 0, idleConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idleConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	// Let the server accept every one of them (making room for each past
	// the cap) before timing a new client.
	if !poll.Soon(time.Minute, func() bool { return evicted.Load() >= idleConns-maxConns }) {
		t.Fatalf("the server accepted only %d connections past its cap in a minute", evicted.Load())
	}
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	start := time.Now()
	resp, err := client.Get("http://" + addr + base + "/monitoring/health")
	if err != nil {
		t.Fatalf("new client after %d idle connections: %v (after %v)", idleConns, err, time.Since(start))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || time.Since(start) > time.Second {
		t.Fatalf("new client: %d after %v", resp.StatusCode, time.Since(start))
	}
	if open := srv.OpenConnections(); open > maxConns {
		t.Fatalf("%d connections open, cap %d", open, maxConns)
	}
}

// worstCaseHeartbeat is the heartbeat of a member owning every shard of a
// stream of protocol.MaxShardCount shards, each reported in shardProgress
// with every field at its longest, and separators spaced as Python's
// json.dumps does.
func worstCaseHeartbeat() []byte {
	prefix := strings.Repeat("p", protocol.MaxNameLength)
	id := "18446744073709551615-18446744073709551615"
	var b bytes.Buffer
	b.WriteString(`{"protocolVersion": 1, "requestId": "r", "memberId": "big", "memberName": "big", "memberEpoch": 0, "metadataVersion": 0, "ownedShards": [`)
	for i := range protocol.MaxShardCount {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"shardIndex": %d}`, i)
	}
	b.WriteString(`], "shardProgress": [`)
	for i := range protocol.MaxShardCount {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"shard": {"shardIndex": %d}, "streamKey": "%s:%d", "lastDeliveredId": "%s", "lastAckedId": "%s", "pendingCount": 9223372036854775807, "updatedAt": "2026-11-30T08:00:00.123456789+00:00"}`,
			i, prefix, i, id, id)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestHeartbeatBodyLimit: the heartbeat of a member owning the most shards
// a stream may have fits the heartbeat body limit, padded to the limit
// itself; one byte more is a 413.
func TestHeartbeatBodyLimit(t *testing.T) {
	t.Parallel()
	s := serveFake(t, newFake(), fakeOptions{})
	s.CreateStream("orders", 2)
	body := worstCaseHeartbeat()
	limit := gateway.MaxHeartbeatBodyBytes
	if len(body) > limit {
		t.Fatalf("the worst-case heartbeat is %d bytes, over the %d-byte limit", len(body), limit)
	}
	atLimit := append(body, bytes.Repeat([]byte(" "), limit-len(body))...)
	status, raw := s.Do(http.MethodPost, heartbeatPath("orders", "big"), atLimit)
	if status != http.StatusOK {
		t.Fatalf("heartbeat of %d bytes (the limit): %d %.300s", len(atLimit), status, raw)
	}
	status, raw = s.Do(http.MethodPost, heartbeatPath("orders", "big"), append(atLimit, ' '))
	if status != http.StatusRequestEntityTooLarge || !contains(raw, protocol.CodePayloadTooLarge) {
		t.Fatalf("one byte over the limit: %d %.300s", status, raw)
	}
	// Admin bodies keep the protocol's 1 MiB.
	status, raw = s.Do(http.MethodPost, base+"/streams/big", `{"requestedBy":"x","reason":"`+strings.Repeat("r", protocol.MaxBodyBytes)+`"}`)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("admin body over 1 MiB: %d %.300s", status, raw)
	}
}

// TestHTTPServerErrorsGoToTheLogger: what net/http logs of the server
// itself (here a handler's panic) reaches the slog logger given to
// NewHTTPServer, at WARN.
func TestHTTPServerErrorsGoToTheLogger(t *testing.T) {
	t.Parallel()
	records := make(chan slog.Record, 16)
	panics := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	srv := gateway.NewHTTPServer(panics, gateway.HTTPLimits{}, slog.New(recordHandler{records}), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()

	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	if resp, err := client.Get("http://" + ln.Addr().String() + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("a panicking handler answered %d", resp.StatusCode)
	}
	select {
	case r := <-records:
		if r.Level != slog.LevelWarn || !strings.Contains(r.Message, "panic serving") || !strings.Contains(r.Message, "boom") {
			t.Errorf("logged %v %q, want the panic at WARN", r.Level, r.Message)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing logged of the handler's panic")
	}
}

// recordHandler is a slog handler passing every record to its channel
// (dropping records when it is full).
type recordHandler struct{ c chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordHandler) WithGroup(string) slog.Handler            { return h }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.c <- r.Clone():
	default:
	}
	return nil
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
