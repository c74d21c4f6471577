// Package connlimit caps the connections an HTTP server holds open at
// once, without letting idle ones starve new clients.
//
// golang.org/x/net/netutil.LimitListener blocks Accept once the cap is
// reached, so a few thousand connections that never send a request (or
// idle keep-alive ones) keep every new client out until they time out.
// A [Limiter] instead closes the connection that has been waiting longest
// without a request in flight (never sent one, or idle between requests)
// to make room; only when every held connection is busy with a request
// does Accept wait for one to finish. File descriptors stay bounded and a
// new client is served at once.
package connlimit

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter tracks the connections of one http.Server: pass its listener
// through [Limiter.Listener] and set http.Server.ConnState to
// [Limiter.ConnState]. It is safe for concurrent use.
type Limiter struct {
	max     int
	now     func() time.Time
	evicted func()

	mu    sync.Mutex
	freed *sync.Cond
	conns map[*conn]struct{}
}

// New returns a limiter of max connections (at least 1). evicted, when not
// nil, is called (outside any lock) each time an idle connection is closed
// to make room, for metrics.
func New(max int, evicted func()) *Limiter {
	if max < 1 {
		max = 1
	}
	l := &Limiter{max: max, now: time.Now, evicted: evicted, conns: map[*conn]struct{}{}}
	l.freed = sync.NewCond(&l.mu)
	return l
}

// Listener wraps ln: each accepted connection counts against the limit.
func (l *Limiter) Listener(ln net.Listener) net.Listener { return &listener{Listener: ln, l: l} }

// Open is the number of connections held.
func (l *Limiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// ConnState follows the server's view of each connection. A request's
// start and end touch only its own connection's state: they come twice
// per request, and a lock shared by every connection was taken for them.
func (l *Limiter) ConnState(c net.Conn, s http.ConnState) {
	cc, ok := c.(*conn)
	if !ok || cc.l != l {
		return
	}
	switch s {
	case http.StateActive:
		cc.busy.Store(true)
	case http.StateIdle:
		cc.since.Store(l.now().UnixNano())
		cc.busy.Store(false)
	case http.StateHijacked, http.StateClosed:
		l.mu.Lock()
		l.drop(cc)
		l.mu.Unlock()
	}
}

// drop forgets c; l.mu is held.
func (l *Limiter) drop(c *conn) {
	if _, ok := l.conns[c]; ok {
		delete(l.conns, c)
		l.freed.Signal()
	}
}

// admit makes room for c, closing the longest-idle connection or waiting
// for a busy one to end, then counts it.
func (l *Limiter) admit(c *conn) {
	l.mu.Lock()
	for len(l.conns) >= l.max {
		var oldest *conn
		var since int64
		for oc := range l.conns {
			if at := oc.since.Load(); !oc.busy.Load() && (oldest == nil || at < since) {
				oldest, since = oc, at
			}
		}
		if oldest == nil {
			l.freed.Wait()
			continue
		}
		l.drop(oldest)
		l.mu.Unlock()
		_ = oldest.Close() // the server sees a read error and lets it go
		if l.evicted != nil {
			l.evicted()
		}
		l.mu.Lock()
	}
	c.since.Store(l.now().UnixNano())
	l.conns[c] = struct{}{}
	l.mu.Unlock()
}

type listener struct {
	net.Listener
	l *Limiter
}

func (ln *listener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	wrapped := &conn{Conn: c, l: ln.l}
	ln.l.admit(wrapped)
	return wrapped, nil
}

// conn forgets itself on Close, so that connections the server never
// reports closed (failed TLS handshakes, say) still free their slot.
type conn struct {
	net.Conn
	l    *Limiter
	once sync.Once
	// busy says a request is in flight; since is when the connection
	// last became idle (or was accepted), in Unix nanoseconds.
	busy  atomic.Bool
	since atomic.Int64
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.drop(c)
		c.l.mu.Unlock()
	})
	return err
}
