package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
)

// closeWait bounds how long Close waits for the refresher to return.
const closeWait = 5 * time.Second

// Lifecycle states of a Producer.
const (
	stateNew int32 = iota
	stateStarted
	stateClosed
)

// Producer publishes records to one sharded stream. Build it with New, call
// Start once, then Publish and PublishBatch from any goroutines; Close it
// when done. Its methods are safe for concurrent use.
type Producer struct {
	cfg     config
	client  *coordclient.Client
	ownHTTP bool // the HTTP client is ours: Close closes its idle connections
	log     *slog.Logger

	state atomic.Int32
	cur   atomic.Pointer[routing] // nil until Start succeeds

	// fetching holds the one token allowed to fetch and store routing, so
	// concurrent refreshes of the same stale snapshot make one request.
	fetching chan struct{}
	kick     chan struct{} // wakes the refresher early; buffered 1

	errMu   sync.Mutex
	lastErr error // the last failed refresh since the last success

	// leaseWarned: the coordinator's routing lease was found no longer
	// than the refresh interval, and said so once.
	leaseWarned atomic.Bool

	mu     sync.Mutex // serializes Start and Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the refresher returns
}

// New builds a producer from opts. Every option is checked here and all
// problems are reported at once; nothing is contacted before Start.
func New(opts ...Opt) (*Producer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.group == "" {
		cfg.group = cfg.prefix
	}
	client, err := coordclient.New(cfg.coordinators, coordclient.Options{
		HTTPClient: cfg.httpClient, Authorization: cfg.authorization, UserAgent: "rscoord-producer",
		MaxResponseBytes: maxRoutingBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &Producer{
		cfg:      cfg,
		client:   client,
		ownHTTP:  cfg.httpClient == nil,
		log:      cfg.logger.With("stream", cfg.prefix, "group", cfg.group),
		fetching: make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
	}, nil
}

// Start fetches the routing and starts the background refresher. It fails
// if the coordinator cannot be reached (with WithStartWait(true) it waits
// for it instead, until ctx ends), answers an error (a *CoordinatorError:
// an unknown stream is 404 STREAM_NOT_FOUND, matched by errors.Is(err,
// ErrStreamNotFound); a 403 may mean a stream the credentials may not see
// or one that does not exist, and the error says both), or the stream has
// no shards (ErrNoShards). A failed Start may be retried; a successful one
// may not be repeated.
func (p *Producer) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state.Load() {
	case stateStarted:
		return errors.New("producer: start: already started")
	case stateClosed:
		return fmt.Errorf("producer: start: %w", ErrClosed)
	}
	r, err := p.startRouting(ctx)
	if err != nil {
		return fmt.Errorf("producer: start %s (group %s): %w", p.cfg.prefix, p.cfg.group, err)
	}
	if len(r.keys) == 0 {
		return fmt.Errorf("producer: start %s (group %s): %w (metadataVersion %d)", p.cfg.prefix, p.cfg.group, ErrNoShards, r.metadataVersion)
	}
	r.gen = 1
	p.cur.Store(r)
	life, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done = make(chan struct{})
	p.state.Store(stateStarted)
	go p.refreshLoop(life) // owned by p; stopped by Close
	p.log.Info("producer started", "shardCount", len(r.keys), "metadataVersion", r.metadataVersion)
	return nil
}

// Close stops the producer, in order:
//  1. mark it closed: Publish and PublishBatch fail with ErrClosed from now
//     on (calls already past that check finish normally);
//  2. cancel the refresher's context, which aborts a routing request in
//     flight;
//  3. wait for the refresher to return, at most 5 s;
//  4. close the idle connections of the producer's own HTTP client.
//
// The Redis client is the caller's: close it after Close. Close is
// idempotent and may be called without Start.
func (p *Producer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.Swap(stateClosed) == stateClosed {
		return
	}
	if p.cancel != nil {
		p.cancel()
		select {
		case <-p.done:
		case <-time.After(closeWait):
			p.log.Error("producer close: refresher did not stop in time", "waited", closeWait)
		}
	}
	if p.ownHTTP {
		p.client.CloseIdleConnections()
	}
}

// Routing returns a copy of the routing in use; ok is false before Start.
func (p *Producer) Routing() (r Routing, ok bool) {
	cur := p.cur.Load()
	if cur == nil {
		return Routing{}, false
	}
	return cur.export(), true
}

// Route is the shard index and stream key partitionKey is published to under
// the current routing (protocol.Route over its shard count). It fails like
// Publish does before writing: ErrNotStarted, ErrClosed,
// ErrRoutingLeaseExpired, ErrNoShards.
func (p *Producer) Route(partitionKey string) (shardIndex int, streamKey string, err error) {
	r, err := p.usable()
	if err != nil {
		return 0, "", fmt.Errorf("producer: route: %w", err)
	}
	i, key, err := r.route(partitionKey)
	if err != nil {
		return 0, "", fmt.Errorf("producer: route: %w", err)
	}
	return i, key, nil
}

// usable is the routing a publish may use now, or why there is none.
// usableNow is usable, except that routing whose lease has passed is first
// refreshed, once, within ctx: a producer that refreshes seldom, or whose
// coordinator's routing lease is short, publishes on current routing
// rather than failing. ErrRoutingLeaseExpired only when that refresh
// fails too.
func (p *Producer) usableNow(ctx context.Context) (*routing, error) {
	r, err := p.usable()
	if !errors.Is(err, ErrRoutingLeaseExpired) {
		return r, err
	}
	if cur := p.cur.Load(); cur != nil {
		_, _ = p.refresh(ctx, cur.gen) // its error is the lease error's "last refresh error"
	}
	return p.usable()
}

func (p *Producer) usable() (*routing, error) {
	switch p.state.Load() {
	case stateNew:
		return nil, ErrNotStarted
	case stateClosed:
		return nil, ErrClosed
	}
	r := p.cur.Load()
	if now := time.Now(); r.expired(now, p.cfg.routingLease) {
		age, lease := r.age(now).Round(time.Millisecond), r.lease(p.cfg.routingLease)
		// The refresh failure is wrapped, not only printed, so a caller
		// tells a coordinator that is down from one that refuses
		// (errors.Is, errors.As on CoordinatorError).
		if last := p.lastRefreshError(); last != nil {
			return nil, fmt.Errorf("%w: last successful refresh %s ago, lease %s; last refresh error: %w",
				ErrRoutingLeaseExpired, age, lease, last)
		}
		return nil, fmt.Errorf("%w: last successful refresh %s ago, lease %s; no refresh failed since",
			ErrRoutingLeaseExpired, age, lease)
	}
	return r, nil
}
