package gateway_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// zeroWindowAttacker opens one h2c connection to addr whose flow-control
// window is 0 (SETTINGS_INITIAL_WINDOW_SIZE 0, never a WINDOW_UPDATE) and
// asks for path on streams streams without credentials: no answer body can
// ever be sent. It reads frames (so that TCP never pushes back) and counts
// the streams answered with HEADERS, and how many of them 503.
type zeroWindowAttacker struct {
	conn              net.Conn
	answered, refused atomic.Int64
	done              chan struct{}
}

func attack(t *testing.T, addr, path string, streams int) *zeroWindowAttacker {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a := &zeroWindowAttacker{conn: conn, done: make(chan struct{})}
	t.Cleanup(func() { conn.Close(); <-a.done })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for i := range streams {
		block.Reset()
		for _, f := range []hpack.HeaderField{
			{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
			{Name: ":authority", Value: addr}, {Name: ":path", Value: path},
		} {
			if err := enc.WriteField(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block.Bytes(),
			EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		defer close(a.done)
		dec := hpack.NewDecoder(4096, nil)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			h, ok := f.(*http2.HeadersFrame)
			if !ok {
				continue
			}
			fields, err := dec.DecodeFull(h.HeaderBlockFragment())
			if err != nil {
				return
			}
			for _, hf := range fields {
				if hf.Name == ":status" && hf.Value == "503" {
					a.refused.Add(1)
				}
			}
			a.answered.Add(1)
		}
	}()
	return a
}

// 100 unauthenticated connections of 100 zero-window streams each park at
// most a few handlers per connection: the rest are answered 503 at once,
// without a body, and the goroutines stay far below one per stream. A
// legitimate client on a connection of its own is still served, and once
// it authenticated, its connection runs more requests at once than an
// unauthenticated one may.
func TestZeroWindowStreamsOfUnauthenticatedConnectionsAreBounded(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	url, _, _ := serveHTTP(t, s, gateway.HTTPLimits{HTTP2: true})
	addr := strings.TrimPrefix(url, "http://")
	idle := runtime.NumGoroutine()

	const conns, streams = 100, 100
	attackers := make([]*zeroWindowAttacker, conns)
	for i := range attackers {
		attackers[i] = attack(t, addr, "/coord/v1/monitoring/groups", streams)
	}
	answered := func() (all, refused int64) {
		for _, a := range attackers {
			all += a.answered.Load()
			refused += a.refused.Load()
		}
		return all, refused
	}
	// Every stream gets its HEADERS: 503 past the bound, 401 (whose body
	// waits for the window) within it.
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n, _ := answered(); n < conns*streams; n, _ = answered() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d streams answered", n, conns*streams)
		}
		<-tick.C
	}
	_, refused := answered()
	if want := int64(conns * (streams - gateway.DefaultMaxUnauthenticatedStreams)); refused < want {
		t.Errorf("%d streams refused 503, want at least %d", refused, want)
	}
	// Refused handlers end just after their HEADERS went out; the
	// admitted ones wait for the window until their write deadline
	// (10 s), far past this.
	settled := time.Now().Add(2 * time.Second)
	extra := runtime.NumGoroutine() - idle
	for extra >= 2000 && time.Now().Before(settled) {
		<-tick.C
		extra = runtime.NumGoroutine() - idle
	}
	if extra >= 2000 {
		t.Fatalf("%d goroutines above idle under the attack, want under 2000", extra)
	}
	t.Logf("%d goroutines above idle under the attack, %d streams refused", extra, refused)

	c := h2cClient(t)
	get := func() int {
		req, err := http.NewRequest(http.MethodGet, url+"/coord/v1/monitoring/groups", nil)
		if err != nil {
			t.Error(err)
			return 0
		}
		req.Header.Set("Authorization", s.Authorization)
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("legitimate client under attack: %d", code)
	}
	// Its connection is trusted now: more requests at once than an
	// unauthenticated connection may have are all served.
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 * gateway.DefaultMaxUnauthenticatedStreams {
		wg.Go(func() {
			if code := get(); code != http.StatusOK {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d requests of the authenticated connection not served", n)
	}
}
