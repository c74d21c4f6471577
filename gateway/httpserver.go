package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/rscoord/rscoord/gateway/internal/connlimit"
)

// HTTPLimits bound what one client can hold of the server: time per
// request phase, connections, streams, header bytes. Body sizes are per
// route (see readBody). Zero values take the defaults below.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included: a body
	// trickling in slower is cut off. Over HTTP/2 it bounds each stream.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing an answer, counted from the end of the
	// request's headers (over HTTP/2, of each stream; a connection whose
	// writes make no progress that long is closed). Held heartbeat answers
	// (waitMs) move their own deadline past their hold with
	// http.ResponseController, over both protocols.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle that long.
	IdleTimeout time.Duration
	// MaxConnections caps open connections, HTTP/1.1 and HTTP/2 alike; at
	// the cap the connection idle longest is closed to make room (package
	// connlimit). An HTTP/2 connection with a stream open is busy.
	MaxConnections int
	// MaxHeldConnections caps the connections that held heartbeats keep
	// busy: each held answer over HTTP/1.1 pins its connection, held
	// answers over HTTP/2 pin theirs while any is parked on it. Past it a
	// heartbeat is answered at once, so that held answers never take the
	// connections that joins, reports and admin calls need. Default three
	// quarters of MaxConnections (at least 1).
	MaxHeldConnections int
	// MaxHeaderBytes caps request headers (over HTTP/2, the header list).
	MaxHeaderBytes int
	// HTTP2 serves HTTP/2 over cleartext with prior knowledge (h2c)
	// beside HTTP/1.1 on the same listener: many requests, held
	// heartbeats among them, share one connection.
	HTTP2 bool
	// MaxConcurrentStreams caps the requests in flight on one HTTP/2
	// connection.
	MaxConcurrentStreams int
	// MaxUnauthenticatedStreams caps the requests in flight on one
	// connection until a request on it authenticated (authgate.go);
	// MaxUnauthenticatedHandlers caps them across all such connections.
	// Past either, a request is answered 503 at once, with no body.
	MaxUnauthenticatedStreams  int
	MaxUnauthenticatedHandlers int
	// UnauthenticatedWriteTimeout replaces WriteTimeout for requests of a
	// connection no request authenticated on yet, until the request
	// itself authenticates: an answer nobody reads (an HTTP/2 window
	// never opened) holds its handler that long at most.
	UnauthenticatedWriteTimeout time.Duration
}

// Defaults of [HTTPLimits], also the defaults of rscoord serve's flags.
const (
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultReadTimeout          = 60 * time.Second
	DefaultWriteTimeout         = 30 * time.Second
	DefaultIdleTimeout          = 90 * time.Second
	DefaultMaxConnections       = 4096
	DefaultMaxHeaderBytes       = 64 << 10
	DefaultMaxConcurrentStreams = 100
)

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.ReadTimeout, DefaultReadTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.MaxHeldConnections <= 0 || l.MaxHeldConnections > l.MaxConnections {
		l.MaxHeldConnections = DefaultMaxHeldConnections(l.MaxConnections)
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConcurrentStreams <= 0 {
		l.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if l.MaxUnauthenticatedStreams <= 0 {
		l.MaxUnauthenticatedStreams = DefaultMaxUnauthenticatedStreams
	}
	if l.MaxUnauthenticatedHandlers <= 0 {
		l.MaxUnauthenticatedHandlers = DefaultMaxUnauthenticatedHandlers
	}
	def(&l.UnauthenticatedWriteTimeout, min(DefaultUnauthenticatedWriteTimeout, l.WriteTimeout))
	return l
}

// DefaultMaxHeldConnections is [HTTPLimits.MaxHeldConnections] for a
// connection cap of conns: three quarters of it, at least 1.
func DefaultMaxHeldConnections(conns int) int { return max(1, conns-conns/4) }

// HTTPServer is an http.Server with limits applied; serve it with
// [HTTPServer.Serve], which applies the connection cap.
type HTTPServer struct {
	*http.Server
	conns  *connlimit.Limiter
	held   *heldConns
	limits HTTPLimits
}

// NewHTTPServer returns a server of handler under limits. The server's own
// errors (a failed TLS handshake, a bad request line, a handler's panic)
// go to log at WARN; nil means slog.Default(). evicted, when not nil, is
// called each time an idle connection is closed to make room.
func NewHTTPServer(handler http.Handler, limits HTTPLimits, log *slog.Logger, evicted func()) *HTTPServer {
	if log == nil {
		log = slog.Default()
	}
	limits = limits.withDefaults()
	conns := connlimit.New(limits.MaxConnections, evicted)
	held := &heldConns{max: limits.MaxHeldConnections}
	gate := newAuthGate(limits)
	srv := &http.Server{
		Handler:           gate.wrap(handler),
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		ConnState:         conns.ConnState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return gate.connContext(held.connContext(ctx, c), c)
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if limits.HTTP2 {
		// The HTTP/2 connection reports StateActive while a stream is
		// open and StateIdle once none is, to the same ConnState, so the
		// connection cap treats it as it treats an HTTP/1.1 connection;
		// ConnContext reaches its streams.
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		srv.HTTP2 = &http.HTTP2Config{
			MaxConcurrentStreams: limits.MaxConcurrentStreams,
			// A client that stops reading must not keep the answers of
			// every other stream of its connection (and their memory).
			WriteByteTimeout: limits.WriteTimeout,
		}
		configureHTTP2(srv)
	}
	return &HTTPServer{conns: conns, held: held, limits: limits, Server: srv}
}

// Serve serves ln with the connection cap.
func (s *HTTPServer) Serve(ln net.Listener) error { return s.Server.Serve(s.conns.Listener(ln)) }

// OpenConnections is the number of connections held.
func (s *HTTPServer) OpenConnections() int { return s.conns.Open() }

// MaxConnections is the connection cap ([HTTPLimits.MaxConnections] as
// applied).
func (s *HTTPServer) MaxConnections() int { return s.limits.MaxConnections }

// MaxHeldConnections is the most connections held heartbeats may keep busy
// ([HTTPLimits.MaxHeldConnections] as applied).
func (s *HTTPServer) MaxHeldConnections() int { return s.limits.MaxHeldConnections }

// HeldConnections is the number of connections held heartbeats keep busy.
func (s *HTTPServer) HeldConnections() int {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	return s.held.pinned
}

// heldConns counts the connections held heartbeats keep busy, against
// [HTTPLimits.MaxHeldConnections].
type heldConns struct {
	mu     sync.Mutex
	max    int
	pinned int
}

// connHolds is one connection's count of held answers, in its context.
type connHolds struct {
	held *heldConns
	n    int // guarded by held.mu
}

type connHoldsKey struct{}

func (h *heldConns) connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connHoldsKey{}, &connHolds{held: h})
}

// holdConnection counts one held answer on the connection that ctx (a
// request's context) arrived on. ok is false when that would make one
// connection too many busy with held answers: the heartbeat is then
// answered at once. release undoes it. A request of a server not built by
// NewHTTPServer (a test's) is not bounded here.
func holdConnection(ctx context.Context) (release func(), ok bool) {
	c, _ := ctx.Value(connHoldsKey{}).(*connHolds)
	if c == nil {
		return func() {}, true
	}
	h := c.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.n == 0 {
		if h.pinned >= h.max {
			return nil, false
		}
		h.pinned++
	}
	c.n++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if c.n--; c.n == 0 {
			h.pinned--
		}
	}, true
}

// configureHTTP2 serves HTTP/2 (h2c, through srv.Protocols) with
// golang.org/x/net/http2 in place of the standard library's copy of it,
// configured by srv.HTTP2 all the same, for one thing the standard
// library cannot choose: the write scheduler. Its round-robin scheduler
// walks every open stream of the connection each time it looks for a
// frame to write, and held heartbeats keep up to MaxConcurrentStreams
// streams open with nothing to write: that walk was the HTTP/2 server's
// largest cost. The random scheduler looks only at streams with frames
// queued; the order of answers on different streams does not matter.
//
// x/net marks the user-chosen scheduler deprecated: from Go 1.27 its
// server wraps the standard library's, which ignores NewWriteScheduler
// (answers stay the same; only this saving goes).
//
// The connections x/net serves are read through a buffer: its server
// reads every frame's header and payload straight from the connection,
// two system calls per frame and four per heartbeat (HEADERS and DATA),
// where one read into a buffer takes a whole heartbeat, or several.
// The buffer has the size net/http gives each HTTP/1 connection's.
func configureHTTP2(srv *http.Server) {
	//nolint:staticcheck // see above: the scheduler is the point
	conf := &http2.Server{NewWriteScheduler: http2.NewRandomWriteScheduler}
	if err := http2.ConfigureServer(srv, conf); err != nil {
		// Only a TLS configuration without HTTP/2's cipher suites fails
		// here, and this server has no TLS configuration.
		panic(fmt.Sprintf("gateway: configure HTTP/2: %v", err))
	}
	serve := srv.TLSNextProto[unencryptedHTTP2]
	if serve == nil {
		panic("gateway: configure HTTP/2: x/net registered no h2c handler")
	}
	srv.TLSNextProto[unencryptedHTTP2] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		if u, ok := c.NetConn().(unencryptedConn); ok {
			raw := u.UnencryptedNetConn()
			c = tls.Client(unencrypted{bufferedConn{raw, bufio.NewReaderSize(raw, 4<<10)}}, nil)
		}
		serve(hs, c, h)
	}
}

// bufferedConn is a connection read through r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// unencryptedHTTP2 is the TLSNextProto key under which net/http hands an
// h2c connection (prior knowledge) to the HTTP/2 server.
const unencryptedHTTP2 = "unencrypted_http2"

// unencryptedConn is how that connection comes: net/http wraps it in a
// *tls.Conn that is never used for TLS, whose NetConn tells the real one.
type unencryptedConn interface {
	UnencryptedNetConn() net.Conn
}

// unencrypted wraps a connection the same way, for the handler x/net
// registered under unencryptedHTTP2.
type unencrypted struct{ net.Conn }

func (u unencrypted) UnencryptedNetConn() net.Conn { return u.Conn }
