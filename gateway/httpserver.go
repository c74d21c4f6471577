package gateway

import (
	"log"
	"net"
	"net/http"
	"time"

	"github.com/rscoord/rscoord/gateway/internal/connlimit"
)

// HTTPLimits bound what one client can hold of the server: time per
// request phase, connections, header bytes. Body sizes are per route
// (see readBody). Zero values take the defaults below.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included: a body
	// trickling in slower is cut off.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing an answer, counted from the end of the
	// request's headers. Held heartbeat answers (waitMs) move their own
	// deadline past their hold with http.ResponseController.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle that long.
	IdleTimeout time.Duration
	// MaxConnections caps open connections; at the cap the connection
	// idle longest is closed to make room (package connlimit).
	MaxConnections int
	// MaxHeaderBytes caps request headers.
	MaxHeaderBytes int
}

// Defaults of [HTTPLimits], also the defaults of rscoord serve's flags.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 90 * time.Second
	DefaultMaxConnections    = 4096
	DefaultMaxHeaderBytes    = 64 << 10
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
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l
}

// HTTPServer is an http.Server with limits applied; serve it with
// [HTTPServer.Serve], which applies the connection cap.
type HTTPServer struct {
	*http.Server
	conns *connlimit.Limiter
}

// NewHTTPServer returns a server of handler under limits. evicted, when
// not nil, is called each time an idle connection is closed to make room.
func NewHTTPServer(handler http.Handler, limits HTTPLimits, errorLog *log.Logger, evicted func()) *HTTPServer {
	limits = limits.withDefaults()
	conns := connlimit.New(limits.MaxConnections, evicted)
	return &HTTPServer{conns: conns, Server: &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		ConnState:         conns.ConnState,
		ErrorLog:          errorLog,
	}}
}

// Serve serves ln with the connection cap.
func (s *HTTPServer) Serve(ln net.Listener) error { return s.Server.Serve(s.conns.Listener(ln)) }

// OpenConnections is the number of connections held.
func (s *HTTPServer) OpenConnections() int { return s.conns.Open() }
