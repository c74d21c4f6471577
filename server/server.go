// Package server wires a coordinator once: the store, Redis, the actors,
// the authenticator, the gateway and its HTTP server with the production
// limits, the metrics and their collector, audit pruning and, in the
// cluster mode, the placement of streams on replicas and the rejoining of
// a replica that lost its lease. rscoord serve, coordtest and the bench
// all run it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/cluster/replica"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/persistence"
)

// Server is a coordinator that serves HTTP. Open starts it, Serve waits
// for its end and Close stops it; in the cluster mode a replica that
// loses its etcd lease stops its coordinator and joins again as a
// stand-by, behind the same listener.
type Server struct {
	cfg Config
	log *slog.Logger
	ln  net.Listener
	url string

	http     *gateway.HTTPServer
	httpDone chan struct{} // closed when http.Serve returned
	httpErr  error         // what it returned; read after httpDone
	httpOnce sync.Once
	httpStop error

	// front is the cluster mode's handler for the listener's whole life.
	front *replica.Front
	// takeOver is the lease of the run that lost it, revoked by the next
	// join (cluster.Options.TakeOver); used by Serve alone.
	takeOver clientv3.LeaseID

	// quitCtx ends when Close is called.
	quitCtx context.Context
	quit    context.CancelFunc

	mu  sync.Mutex
	cur *run // the coordinator serving now; nil between two joins

	closeOnce sync.Once
	closeErr  error
}

// Open starts a server: it listens, opens the store, starts the
// coordinator and serves. The address is taken first: a first start
// prints the generated admin password once, and a start that then failed
// on an address in use would have spent it. On an error everything
// opened is closed again.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, httpDone: make(chan struct{})}
	s.quitCtx, s.quit = context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	s.ln, s.url = ln, "http://"+ln.Addr().String()
	if cfg.Cluster == nil {
		r, err := s.openRun(ctx)
		if err != nil {
			return nil, errors.Join(err, ln.Close())
		}
		s.cur = r
		return s, nil
	}
	if err := s.serveFront(); err != nil {
		return nil, errors.Join(err, ln.Close())
	}
	r, err := s.openRun(ctx)
	if err != nil {
		return nil, errors.Join(err, s.shutdownHTTP(context.Background()))
	}
	s.cur = r
	return s, nil
}

// serveFront serves the cluster mode's front on the listener, from before
// the first join until the server closes.
func (s *Server) serveFront() error {
	c := s.cfg.Cluster
	var secret []byte
	if s.cfg.Auth || s.cfg.Authenticator != nil {
		// Every replica shares the token secret; without a shared one,
		// forwarded client addresses are simply not trusted.
		var err error
		if secret, err = auth.LoadOrCreateSecret(s.cfg.DataDir, s.cfg.TokenSecret); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	s.front = replica.NewFront(replica.FrontConfig{
		Self: c.replicaID(), AdvertiseURL: c.AdvertiseURL, Logger: s.log, Group: s.cfg.Group,
		OwnerTimeout: max(2*s.cfg.Group.HeartbeatInterval, 5*time.Second), Secret: secret,
	})
	s.startHTTP(s.front)
	s.log.Info("replica listening", slog.String("address", s.ln.Addr().String()), slog.String("replica", c.replicaID()),
		slog.String("advertiseUrl", c.AdvertiseURL))
	return nil
}

// startHTTP serves handler on the listener with the HTTP limits.
func (s *Server) startHTTP(handler http.Handler) {
	s.http = gateway.NewHTTPServer(handler, s.cfg.httpLimits(s.log), s.log, nil)
	go func() {
		s.httpErr = s.http.Serve(s.ln)
		close(s.httpDone)
	}()
}

// shutdownHTTP stops the HTTP server, waiting for its requests at most
// until ctx ends; later calls return the first call's error.
func (s *Server) shutdownHTTP(ctx context.Context) error {
	s.httpOnce.Do(func() {
		if s.http == nil {
			s.httpStop = s.ln.Close()
			return
		}
		err := s.http.Shutdown(ctx)
		<-s.httpDone
		if !errors.Is(s.httpErr, http.ErrServerClosed) {
			err = errors.Join(err, s.httpErr)
		}
		s.httpStop = err
	})
	return s.httpStop
}

// Serve blocks until ctx ends, Close is called, or the server fails,
// then shuts down in order (see Close). In the cluster mode a replica
// that lost its lease joins again meanwhile, retrying until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	var err error
	for {
		s.mu.Lock()
		r := s.cur
		s.mu.Unlock()
		if r == nil {
			break // closed
		}
		err = s.wait(ctx, r)
		if !errors.Is(err, cluster.ErrLeaseLost) || ctx.Err() != nil {
			break
		}
		// Until it joined again, the replica answers that it cannot be
		// sure of its lease (etcd did not confirm it in time).
		s.front.SetDetached(protocol.CodeReplicaLeaseUncertain, "it lost its etcd lease and joins again")
		s.takeOver = r.lease
		closeErr := s.closeRun(r)
		s.log.Warn("joining the cluster again", slog.Any("reason", errors.Join(err, closeErr)))
		if !s.rejoin(ctx) {
			err = nil
			break
		}
	}
	if ctx.Err() != nil {
		s.log.Info("shutting down", slog.Duration("timeout", s.cfg.ShutdownTimeout))
	}
	cctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := errors.Join(err, s.Close(cctx)); err != nil {
		return err
	}
	s.log.Info("rscoord stopped cleanly")
	return nil
}

// wait waits for the end of r: ctx, Close, a failed HTTP server or, in
// the cluster mode, a lost lease (an error wrapping cluster.ErrLeaseLost).
func (s *Server) wait(ctx context.Context, r *run) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.quitCtx.Done():
		return nil
	case <-s.httpDone:
		if errors.Is(s.httpErr, http.ErrServerClosed) {
			return nil
		}
		return s.httpErr
	case <-r.ctx.Done():
		if err := context.Cause(r.ctx); errors.Is(err, cluster.ErrLeaseLost) {
			return err
		}
		return nil
	}
}

// rejoin opens the coordinator again after a lost lease, once a second
// until it succeeds: etcd may still be without quorum, and the replica
// must come back when it returns. false when ctx ended or Close was
// called first.
func (s *Server) rejoin(ctx context.Context) bool {
	// The new run ends with ctx or with Close, whichever comes first.
	ctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(s.quitCtx, cancel)()
	for {
		select {
		case <-ctx.Done():
			if s.quitCtx.Err() == nil {
				s.log.Info("stopped while joining the cluster")
			}
			cancel()
			return false
		case <-time.After(time.Second):
		}
		r, err := s.openRun(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("joining the cluster again failed; retrying", slog.Any("error", err))
			}
			continue
		}
		r.release = cancel
		s.mu.Lock()
		closed := s.quitCtx.Err() != nil
		if !closed {
			s.cur = r
		}
		s.mu.Unlock()
		if closed {
			_ = s.closeRun(r)
			return false
		}
		s.front.SetDetached(protocol.CodeReplicaJoining, "starting or stopping")
		return true
	}
}

// closeRun shuts r down with the shutdown timeout.
func (s *Server) closeRun(r *run) error {
	s.mu.Lock()
	if s.cur == r {
		s.cur = nil
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	return r.close(cctx)
}

// Close shuts the server down in order: the coordinator stops taking
// mutations (503 COORDINATOR_TERMINATING) and answers heartbeats RETRY, so
// members keep their shards; in the cluster mode the replica gives its
// owner keys up and leaves; the collector stops; the HTTP server stops
// accepting and waits for in-flight requests until ctx ends; the actors
// stop, each after the message it is handling; the store closes (bounded
// by its own timeout), so Pebble's files are clean for the next start;
// the authenticator closes. Later calls return the first call's error.
func (s *Server) Close(ctx context.Context) error {
	s.quit()
	s.closeOnce.Do(func() {
		s.mu.Lock()
		r := s.cur
		s.cur = nil
		s.mu.Unlock()
		var err error
		if r != nil {
			err = r.close(ctx)
		}
		s.closeErr = errors.Join(err, s.shutdownHTTP(ctx))
	})
	return s.closeErr
}

// URL is the server's base URL, http://host:port of its listener.
func (s *Server) URL() string { return s.url }

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Store is the store of the coordinator running now; nil between two
// joins of the cluster mode.
func (s *Server) Store() persistence.Store { return s.now().store }

// Coordinator is the coordinator running now; nil between two joins.
func (s *Server) Coordinator() *actors.Coordinator { return s.now().coord }

// Authenticator checks credentials; nil when authentication is off.
func (s *Server) Authenticator() *auth.Authenticator { return s.now().authn }

// Metrics is the registry and observer of the coordinator running now.
func (s *Server) Metrics() *metrics.Metrics { return s.now().metrics }

// Handler is the gateway's handler of the coordinator running now.
func (s *Server) Handler() http.Handler { return s.now().handler }

// now is the coordinator running now, an empty run without one.
func (s *Server) now() *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return &run{}
	}
	return s.cur
}
