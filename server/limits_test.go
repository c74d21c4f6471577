package server

import (
	"bytes"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/gateway"
)

func TestHeldHeartbeatsLeaveConnectionsFree(t *testing.T) {
	for _, tc := range []struct {
		http2             bool
		flag, conns, want int
	}{
		{flag: 0, conns: 4096, want: 3072},
		{flag: 0, conns: 16, want: 12},
		{flag: 0, conns: 1, want: 1},
		{flag: 1000, conns: 4096, want: 1000},
		// The file descriptor limit lowered the cap below the flag's room.
		{flag: 4000, conns: 1024, want: 768},
		// HTTP/2: held answers share connections, up to the streams of
		// three quarters of the cap; by default 65536 at most.
		{http2: true, flag: 0, conns: 4096, want: 65536},
		{http2: true, flag: 0, conns: 100, want: 7500},
		{http2: true, flag: 20000, conns: 1024, want: 20000},
		{http2: true, flag: 20000, conns: 100, want: 7500},
	} {
		s := Config{MaxHeldHeartbeats: tc.flag, HTTP: gateway.HTTPLimits{HTTP2: tc.http2, MaxConcurrentStreams: 100}}
		if got := s.MaxHeld(tc.conns); got != tc.want {
			t.Errorf("--http2=%v --max-held-heartbeats %d with %d connections: %d held, want %d", tc.http2, tc.flag, tc.conns, got, tc.want)
		}
	}
}

// An explicit --max-held-heartbeats above three quarters of the connection
// cap is lowered with a warning naming both figures; one that fits is
// taken silently.
func TestHeldCapWarnsWhenLowered(t *testing.T) {
	for _, tc := range []struct {
		flag, conns int
		warn        bool
	}{
		{flag: 0, conns: 4096},
		{flag: 3000, conns: 4096},
		{flag: 4000, conns: 4096, warn: true},
	} {
		var buf bytes.Buffer
		s := Config{MaxHeldHeartbeats: tc.flag, HTTP: gateway.HTTPLimits{MaxConnections: tc.conns}}
		got := s.HeldCap(slog.New(slog.NewTextHandler(&buf, nil)))
		if got != s.MaxHeld(s.connectionCap()) {
			t.Errorf("%+v: heldCap %d, maxHeld %d", tc, got, s.MaxHeld(s.connectionCap()))
		}
		warned := strings.Contains(buf.String(), "--max-held-heartbeats lowered") && strings.Contains(buf.String(), "requested="+strconv.Itoa(tc.flag))
		if warned != tc.warn {
			t.Errorf("%+v: warned %v, want %v: %s", tc, warned, tc.warn, buf.String())
		}
	}
}

// blockingCloser is a store whose Close waits for release, as Close does
// behind a write stuck in Pebble's write stall.
type blockingCloser struct{ release chan struct{} }

func (b blockingCloser) Close() error { <-b.release; return nil }

// TestCloseStoreGivesUpOnAStuckWrite: shutdown waits for the store's Close
// at most its bound, then says why it left the store open; a Close that
// returns in time is waited for and its error kept.
func TestCloseStoreGivesUpOnAStuckWrite(t *testing.T) {
	stuck := blockingCloser{release: make(chan struct{})}
	defer close(stuck.release) // the goroutine CloseStore left behind ends
	start := time.Now()
	err := CloseStore(stuck, 50*time.Millisecond)
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "not closed after 50ms") || took > 5*time.Second {
		t.Fatalf("stuck close: err %v after %s", err, took)
	}
	closeErr := errors.New("close failed")
	if err := CloseStore(closerFunc(func() error { return closeErr }), time.Minute); !errors.Is(err, closeErr) {
		t.Fatalf("close in time: %v, want its own error", err)
	}
}

// closerFunc is a Close method of a function.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }
