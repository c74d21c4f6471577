package gateway

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the bounds on connections that have not authenticated a
// request yet ([HTTPLimits]).
const (
	DefaultMaxUnauthenticatedStreams   = 8
	DefaultMaxUnauthenticatedHandlers  = 1024
	DefaultUnauthenticatedWriteTimeout = 10 * time.Second
)

// authGate bounds what connections that have not yet authenticated a
// request can hold of the server. An HTTP/2 client that opens many streams
// and never opens its flow-control window (SETTINGS initial window 0)
// parks one handler goroutine, and its answer, per stream until the write
// deadline: 100 connections of 100 streams were 10,000 goroutines and
// 150 MB. Until a request on it authenticates ([trustConnection]), a
// connection has at most perConn handlers in flight, all such connections
// together at most max, and each of their requests a short write deadline;
// a request past a bound is answered at once, 503 with Retry-After and no
// body (a body would wait for the window too). Once one request of a
// connection authenticated, the connection is served as any other: held
// heartbeats, which keep streams open for long, come from authenticated
// connections, and the held-heartbeat bounds limit them.
type authGate struct {
	perConn, max int
	short, full  time.Duration

	mu       sync.Mutex
	inFlight int // handlers in flight on untrusted connections
}

// gateConn is one connection's standing with the gate, in its context.
type gateConn struct {
	gate    *authGate
	trusted atomic.Bool
	n       int // handlers in flight while untrusted; guarded by gate.mu
	// basic is the Basic credentials the connection last checked
	// (recallBasic); its streams share it over HTTP/2.
	basic atomic.Pointer[basicMemo]
	// client is the client address gin read for the connection's peer
	// (server.clientIP).
	client atomic.Pointer[clientMemo]
}

type gateConnKey struct{}

func newAuthGate(l HTTPLimits) *authGate {
	return &authGate{perConn: l.MaxUnauthenticatedStreams, max: l.MaxUnauthenticatedHandlers,
		short: l.UnauthenticatedWriteTimeout, full: l.WriteTimeout}
}

func (g *authGate) connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, gateConnKey{}, &gateConn{gate: g})
}

// wrap applies the gate in front of next.
func (g *authGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gc, _ := r.Context().Value(gateConnKey{}).(*gateConn)
		if gc == nil || gc.trusted.Load() {
			next.ServeHTTP(w, r)
			return
		}
		if !g.enter(gc) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		defer g.leave(gc)
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(g.short))
		next.ServeHTTP(w, r)
		if r.ProtoMajor == 2 && !gc.trusted.Load() {
			// The HTTP/2 server sends what the handler buffered after
			// it returned, waiting for the client's window: flushed
			// here, that wait counts against the gate too.
			_ = rc.Flush()
		}
	})
}

func (g *authGate) enter(gc *gateConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc.n >= g.perConn || g.inFlight >= g.max {
		return false
	}
	gc.n++
	g.inFlight++
	return true
}

func (g *authGate) leave(gc *gateConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc.n > 0 { // 0 once the connection was trusted meanwhile
		gc.n--
		g.inFlight--
	}
}

// trustConnection marks the connection of r as one whose caller
// authenticated: its requests are no longer bounded by the gate, and r's
// answer gets the full write timeout again. The authorization middleware
// calls it once credentials checked out. A request of a server not built
// by NewHTTPServer (a test's) has no gate: nothing happens.
func trustConnection(w http.ResponseWriter, r *http.Request) {
	gc, _ := r.Context().Value(gateConnKey{}).(*gateConn)
	if gc == nil || gc.trusted.Load() {
		return
	}
	g := gc.gate
	g.mu.Lock()
	if !gc.trusted.Swap(true) {
		g.inFlight -= gc.n
		gc.n = 0
	}
	g.mu.Unlock()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(g.full))
}
