package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
)

// forwardedByHeader names the stand-by that forwarded a request, on the
// forwarded request and on its answer. A replica that does not own the
// coordinator never forwards a request that carries it: two replicas with
// stale views of etcd would otherwise bounce it between them.
const forwardedByHeader = "X-Rscoord-Forwarded-By"

// maxBufferedHeartbeat is how much of a heartbeat body a stand-by keeps
// while forwarding it, to answer RETRY to the right requestId when the
// owner cannot be reached. Heartbeats are far smaller; a larger body is
// still forwarded whole.
const maxBufferedHeartbeat = 64 << 10

// heartbeatPath matches the heartbeat route (docs/protocol.md §5.3).
var heartbeatPath = regexp.MustCompile(`^` + regexp.QuoteMeta(protocol.BasePath) + `/streams/[^/]+/groups/[^/]+/members/([^/]+)/heartbeat$`)

// front is the HTTP handler of a cluster-mode replica for its whole life:
// while this replica owns the coordinator and its lease is certain, the
// coordinator's own handler answers; otherwise requests are forwarded to
// the owner that etcd names, with the caller's credentials, and while no
// owner can be reached heartbeats are answered RETRY (200, docs/protocol.md
// §5.3) and everything else 503 STORE_UNAVAILABLE with Retry-After. The
// probes are answered here: /healthz always, /readyz ready while a live
// owner is known.
type front struct {
	self  string
	log   *slog.Logger
	group assign.Config // intervals of the RETRY answers
	// transport reaches the owners: short dials (a dead owner refuses at
	// once, a frozen one must not hold a member's heartbeat for long).
	transport http.RoundTripper

	node   atomic.Pointer[cluster.Node] // nil between two joins
	owner  atomic.Pointer[ownerHandler] // set while this replica serves as the owner
	lookup atomic.Pointer[ownerLookup]  // the last liveOwner answer

	// buffers are the proxies' copy buffers: without a pool each
	// forwarded answer allocates (and zeroes) 32 KiB of its own.
	buffers proxyBuffers

	mu      sync.Mutex
	proxies map[string]*httputil.ReverseProxy // advertise URL → proxy; guarded by mu
}

// proxyBuffers is an httputil.BufferPool of 32 KiB buffers.
type proxyBuffers struct{ pool sync.Pool }

// proxyBufferSize is the size of httputil.ReverseProxy's own buffers.
const proxyBufferSize = 32 << 10

func (b *proxyBuffers) Get() []byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		return *p
	}
	return make([]byte, proxyBufferSize)
}

func (b *proxyBuffers) Put(buf []byte) {
	if cap(buf) == proxyBufferSize {
		buf = buf[:proxyBufferSize]
		b.pool.Put(&buf)
	}
}

// ownerHandler is the coordinator's handler while this replica owns it.
// Every request it serves holds a read lock, so that dropping it can wait
// for them before the coordinator stops.
type ownerHandler struct {
	h http.Handler
	// forwarded counts the requests a stand-by forwarded here.
	forwarded prometheus.Counter
	mu        sync.RWMutex
}

func newFront(self string, log *slog.Logger, group assign.Config, ownerTimeout time.Duration) *front {
	dialer := &net.Dialer{Timeout: time.Second, KeepAlive: 15 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = dialer.DialContext
	tr.ResponseHeaderTimeout = ownerTimeout
	tr.MaxIdleConnsPerHost = 256
	return &front{self: self, log: log, group: group.EnsureDefaults(), transport: tr, proxies: map[string]*httputil.ReverseProxy{}}
}

// serveOwner makes h answer every request from now on, counting those a
// stand-by forwarded in forwarded.
func (f *front) serveOwner(h http.Handler, forwarded prometheus.Counter) *ownerHandler {
	o := &ownerHandler{h: h, forwarded: forwarded}
	f.owner.Store(o)
	return o
}

// dropOwner stops sending requests to o and waits, at most until ctx
// ends, for those it is serving.
func (f *front) dropOwner(ctx context.Context, o *ownerHandler) error {
	f.owner.CompareAndSwap(o, nil)
	drained := make(chan struct{})
	go func() {
		o.mu.Lock() // granted once every request holding a read lock ended
		close(drained)
	}()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("requests still in flight when the coordinator stops: %w", ctx.Err())
	}
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := f.owner.Load(); o != nil && o.mu.TryRLock() {
		defer o.mu.RUnlock()
		if n := f.node.Load(); n == nil || !n.Valid() {
			f.unsure(w, r, "this replica's ownership is not certain (its etcd lease may have lapsed)")
			return
		}
		if r.Header.Get(forwardedByHeader) != "" {
			o.forwarded.Inc()
		}
		o.h.ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "UP"})
		return
	case "/readyz":
		if _, err := f.liveOwner(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "NOT_READY"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "READY"})
		return
	}
	owner, err := f.liveOwner()
	if err != nil {
		f.unsure(w, r, err.Error())
		return
	}
	if by := r.Header.Get(forwardedByHeader); by != "" {
		f.unsure(w, r, fmt.Sprintf("forwarded by %s to a replica that does not own the coordinator (ownership is moving)", by))
		return
	}
	f.forward(w, r, owner.AdvertiseURL)
}

// forward sends r to the owner at advertise and its answer back.
func (f *front) forward(w http.ResponseWriter, r *http.Request, advertise string) {
	p, err := f.proxy(advertise)
	if err != nil {
		f.unsure(w, r, err.Error())
		return
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/heartbeat") && heartbeatPath.MatchString(r.URL.Path) && r.Body != nil {
		// Keep the start of the body: the answer RETRY echoes its requestId
		// when the owner cannot be reached.
		head, err := io.ReadAll(io.LimitReader(r.Body, maxBufferedHeartbeat))
		if err != nil {
			f.unsure(w, r, "reading the heartbeat: "+err.Error())
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), bufferedBodyKey{}, head))
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	}
	p.ServeHTTP(w, r)
}

// ownerCacheFor is how long liveOwner's answer is reused: decoding the
// watched keys on every forwarded heartbeat costs more than the watch's
// own delay is worth.
const ownerCacheFor = 50 * time.Millisecond

// ownerLookup is one answer of liveOwner and when it was found.
type ownerLookup struct {
	node  *cluster.Node
	owner cluster.Replica
	err   error
	at    time.Time
}

// liveOwner is the replica that owns the coordinator, as this replica's
// watch of etcd sees it, when that is another live replica. The answer is
// reused for ownerCacheFor, except when this replica's lease is no longer
// certain.
func (f *front) liveOwner() (cluster.Replica, error) {
	n := f.node.Load()
	if c := f.lookup.Load(); c != nil && c.node == n && n != nil && time.Since(c.at) < ownerCacheFor && n.Valid() {
		return c.owner, c.err
	}
	owner, err := f.findOwner(n)
	f.lookup.Store(&ownerLookup{node: n, owner: owner, err: err, at: time.Now()})
	return owner, err
}

func (f *front) findOwner(n *cluster.Node) (cluster.Replica, error) {
	if n == nil || !n.Valid() {
		return cluster.Replica{}, fmt.Errorf("replica %s is not in the cluster right now (joining, or its etcd lease is not certain)", f.self)
	}
	holder, ok := n.Holder(coordinatorUnit)
	switch {
	case !ok:
		return cluster.Replica{}, fmt.Errorf("no replica owns the coordinator right now (ownership is moving)")
	case holder.ID == f.self:
		return cluster.Replica{}, fmt.Errorf("replica %s is taking over the coordinator", f.self)
	}
	for _, r := range n.Replicas() {
		if r.ID == holder.ID {
			return holder, nil
		}
	}
	return cluster.Replica{}, fmt.Errorf("the owner %s is no longer registered (ownership is moving)", holder.ID)
}

// bufferedBodyKey holds the start of a forwarded heartbeat's body in its
// request's context.
type bufferedBodyKey struct{}

// proxy is the reverse proxy to one owner, made once per advertise URL.
func (f *front) proxy(advertise string) (*httputil.ReverseProxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.proxies[advertise]; ok {
		return p, nil
	}
	target, err := url.Parse(advertise)
	if err != nil {
		return nil, fmt.Errorf("owner advertise URL %q: %w", advertise, err)
	}
	p := &httputil.ReverseProxy{
		Transport:  f.transport,
		BufferPool: &f.buffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(forwardedByHeader, f.self)
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(forwardedByHeader, f.self)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the caller went away: nobody reads an answer
			}
			f.unsure(w, r, fmt.Sprintf("the owner %s did not answer: %v", advertise, err))
		},
		ErrorLog: slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
	f.proxies[advertise] = p
	return p, nil
}

// unsure answers a request that nobody can serve right now: a heartbeat
// RETRY in a 200 (the member keeps its shards and heartbeats again, here
// or at its next coordinator URL), anything else 503 with Retry-After.
func (f *front) unsure(w http.ResponseWriter, r *http.Request, why string) {
	w.Header().Set(forwardedByHeader, f.self)
	m := heartbeatPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, protocol.NewErrorBody(protocol.CodeStoreUnavailable, why+"; retry, or another coordinator URL"))
		return
	}
	var req protocol.HeartbeatRequest
	body, buffered := r.Context().Value(bufferedBodyKey{}).([]byte)
	if !buffered && r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, maxBufferedHeartbeat))
	}
	_ = json.Unmarshal(body, &req) // whatever parses is echoed; the rest stays zero
	if memberID, err := url.PathUnescape(m[1]); err == nil {
		req.MemberID = memberID
	}
	resp := assign.RetryResponse(&req, f.group)
	resp.Message = why
	writeJSON(w, http.StatusOK, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
