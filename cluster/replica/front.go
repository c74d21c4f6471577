package replica

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// ForwardedByHeader names the replica that forwarded a request, on the
// forwarded request and on its answer. A request that carries it is never
// forwarded again: two replicas with stale views of etcd would otherwise
// bounce it between them.
const ForwardedByHeader = "X-Rscoord-Forwarded-By"

// clientAddressHeader carries, on a forwarded request, the address of the
// client the forwarding replica took it from, signed with the key every
// replica derives from the shared token secret (clientaddr.go): address
// limits (failed password checks per address) and the audit log see the
// client, not the forwarding replica; the owner reads the request's
// X-Forwarded-For as the forwarding replica received it (dropLastHop).
// Without a valid signature it is ignored and dropped.
const clientAddressHeader = "X-Rscoord-Client-Address"

// maxBufferedHeartbeat is how much of a heartbeat body a forwarding replica
// keeps, to answer RETRY to the right requestId when the owner cannot be
// reached. Heartbeats are far smaller; a larger body is still forwarded
// whole.
const maxBufferedHeartbeat = 64 << 10

// heartbeatPath matches the heartbeat route (docs/protocol.md §5.3).
var heartbeatPath = regexp.MustCompile(`^` + regexp.QuoteMeta(protocol.BasePath) + `/streams/[^/]+/groups/[^/]+/members/([^/]+)/heartbeat$`)

// streamPath matches every route about one stream and captures it: the
// admin and heartbeat routes and the monitoring routes of its groups.
var streamPath = regexp.MustCompile(`^` + regexp.QuoteMeta(protocol.BasePath) + `(?:/monitoring)?/streams/([^/]+)(?:/|$)`)

// grafanaMessagesPath is the one route about a stream that names it in its
// query (streamPrefix) rather than in its path.
const grafanaMessagesPath = protocol.BasePath + "/monitoring/grafana/messages"

// streamOf is the stream a request is about, "" for the routes of the
// whole replica (login, health, lists, metrics, console).
func streamOf(path string) string {
	m := streamPath.FindStringSubmatch(path)
	if m == nil || protocol.ValidateStreamPrefix(m[1]) != nil {
		return "" // an invalid name is refused here, like on any replica
	}
	return m[1]
}

// Front is the HTTP handler of a cluster-mode replica for its whole life.
// A request about a stream this replica runs, and every request about no
// stream, is answered by the coordinator's own handler; a request about a
// stream another replica runs is forwarded to it with the caller's
// credentials; while a stream moves (no live owner, or this replica's
// lease is not certain) heartbeats are answered RETRY (200,
// docs/protocol.md §5.3) and everything else 503 STORE_UNAVAILABLE with
// Retry-After. The probes are answered here while no coordinator runs:
// live, not ready.
type Front struct {
	self string
	// advertise is this replica's advertise URL, named in protocol.OwnerURLHeader
	// on the answers about the streams it runs; "" names none.
	advertise string
	log       *slog.Logger
	group     assign.Config // intervals of the RETRY answers
	// transport reaches the owners: short dials (a dead owner refuses at
	// once, a frozen one must not hold a member's heartbeat for long).
	transport http.RoundTripper
	// peers signs and checks clientAddressHeader; nil: never trusted.
	peers *peerKey

	rep   atomic.Pointer[Runner]       // nil between two joins
	owner atomic.Pointer[ownerHandler] // set while the coordinator runs
	// detached says why no coordinator runs (nil: joining).
	detached atomic.Pointer[detachedReason]

	// buffers are the proxies' copy buffers: without a pool each
	// forwarded answer allocates (and zeroes) 32 KiB of its own.
	buffers proxyBuffers

	mu      sync.Mutex
	proxies map[string]*httputil.ReverseProxy // advertise URL → proxy; guarded by mu
	// longTransport forwards the calls that may wait for members
	// (longCall): its answer headers may take the hand-off bound.
	longTransport *http.Transport
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

// ownerHandler is the coordinator's handler while it runs. Every request it
// serves holds a read lock, so that dropping it can wait for them before
// the coordinator stops.
type ownerHandler struct {
	h http.Handler
	// forwarded counts the requests another replica forwarded here.
	forwarded prometheus.Counter
	mu        sync.RWMutex
}

// FrontConfig configures a replica's front.
type FrontConfig struct {
	// Self is this replica's id, AdvertiseURL the URL other replicas and
	// clients reach it at (named in protocol.OwnerURLHeader).
	Self, AdvertiseURL string
	Logger             *slog.Logger
	// Group gives the intervals of the RETRY answers.
	Group assign.Config
	// OwnerTimeout bounds how long a forwarded request waits for the
	// owner's answer headers.
	OwnerTimeout time.Duration
	// Secret is the token secret every replica shares: forwarded client
	// addresses are signed with a key derived from it. Nil: none trusted.
	Secret []byte
}

// NewFront is the front of a replica; it routes nothing until Attach.
func NewFront(cfg FrontConfig) *Front {
	f := newFront(cfg.Self, cfg.Logger, cfg.Group, cfg.OwnerTimeout, newPeerKey(cfg.Secret))
	f.advertise = strings.TrimSuffix(cfg.AdvertiseURL, "/")
	return f
}

// Attach makes the front route through r from now on; the returned
// detach stops that, unless another Runner was attached since.
func (f *Front) Attach(r *Runner) (detach func()) {
	f.rep.Store(r)
	return func() { f.rep.CompareAndSwap(r, nil) }
}

// IsHeartbeat reports whether path is the heartbeat route.
func IsHeartbeat(path string) bool { return heartbeatPath.MatchString(path) }

func newFront(self string, log *slog.Logger, group assign.Config, ownerTimeout time.Duration, peers *peerKey) *Front {
	dialer := &net.Dialer{Timeout: time.Second, KeepAlive: 15 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = dialer.DialContext
	tr.ResponseHeaderTimeout = ownerTimeout
	tr.MaxIdleConnsPerHost = 256
	group = group.EnsureDefaults()
	long := tr.Clone()
	long.ResponseHeaderTimeout = group.HandOffBound() + longCallSlack
	return &Front{self: self, log: log, group: group, transport: tr, longTransport: long, peers: peers, proxies: map[string]*httputil.ReverseProxy{}}
}

// ServeOwner makes h answer from now on, counting the requests another
// replica forwarded in forwarded. drop stops sending requests to h and
// waits, at most until ctx ends, for those it is serving.
func (f *Front) ServeOwner(h http.Handler, forwarded prometheus.Counter) (drop func(ctx context.Context) error) {
	o := &ownerHandler{h: h, forwarded: forwarded}
	f.owner.Store(o)
	return func(ctx context.Context) error { return f.dropOwner(ctx, o) }
}

// dropOwner stops sending requests to o and waits, at most until ctx
// ends, for those it is serving.
func (f *Front) dropOwner(ctx context.Context, o *ownerHandler) error {
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

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = f.clientAddress(r)
	forwardedBy := r.Header.Get(ForwardedByHeader)
	prefix := streamOf(r.URL.Path)
	if prefix == "" && r.URL.Path == grafanaMessagesPath {
		prefix = streamOf(protocol.BasePath + "/streams/" + r.URL.Query().Get("streamPrefix"))
	}
	rep := f.rep.Load()
	if prefix != "" {
		if rep == nil {
			f.unsureDetached(w, r)
			return
		}
		creates := r.Method == http.MethodPost && r.URL.Path == protocol.BasePath+"/streams/"+prefix
		local, to, err := rep.route(r, prefix, forwardedBy != "", creates)
		switch {
		case err != nil:
			f.unsure(w, r, codeOf(err), err.Error())
		case local && heartbeatPath.MatchString(r.URL.Path):
			f.serveHeartbeat(w, r, forwardedBy, rep, prefix)
		case local:
			f.serveLocal(w, r, forwardedBy, true)
		default:
			f.forward(w, r, to.AdvertiseURL)
		}
		return
	}
	if f.owner.Load() == nil {
		switch r.URL.Path {
		case "/healthz":
			writeJSON(w, http.StatusOK, map[string]string{"status": "UP"})
			return
		case "/readyz":
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "NOT_READY"})
			return
		}
	}
	if merge, ok := clusterLists[r.URL.Path]; ok && r.Method == http.MethodGet && forwardedBy == "" && rep != nil {
		f.fanOut(w, r, rep, merge)
		return
	}
	f.serveLocal(w, r, forwardedBy, false)
}

// serveLocal answers with the coordinator's handler, or RETRY / 503 while
// it does not run. owned: the request is about a stream this replica runs,
// whose answer names it in protocol.OwnerURLHeader.
func (f *Front) serveLocal(w http.ResponseWriter, r *http.Request, forwardedBy string, owned bool) {
	o := f.owner.Load()
	if o == nil || !o.mu.TryRLock() {
		f.unsureDetached(w, r)
		return
	}
	defer o.mu.RUnlock()
	if owned && f.advertise != "" {
		w.Header().Set(protocol.OwnerURLHeader, f.advertise)
	}
	if forwardedBy != "" {
		o.forwarded.Inc()
	}
	o.h.ServeHTTP(w, r)
}

// serveHeartbeat answers a heartbeat about a stream this replica runs,
// sending the answer only if the replica still runs the stream with a
// certain lease once the answer is complete, else RETRY. The member's
// lease counts from the answer (docs/protocol.md §9.1): an answer sent
// after this replica's owner key may have lapsed (a held heartbeat, a
// process paused between the routing and the answer) could reach the
// member after another replica loaded the stream and counted every
// member's lease from that load, letting the member read past it.
//
// A heartbeat about a stream this replica did not run when it came in,
// and still does not (one the store does not hold, see replica.route), is
// answered as it is: that answer grants nothing.
func (f *Front) serveHeartbeat(w http.ResponseWriter, r *http.Request, forwardedBy string, rep *Runner, prefix string) {
	servedBefore := rep.isServing(prefix)
	// Keep the start of the body: a RETRY echoes its requestId.
	r, err := keepHeartbeatHead(r)
	if err != nil {
		f.unsure(w, r, protocol.CodeStoreUnavailable, err.Error())
		return
	}
	// The answer waits what the heartbeat asks to be held and the
	// forwarding bound more, never longer: a store write that etcd does
	// not commit in that time (no quorum, or this replica cut off from
	// it) is answered RETRY now rather than after the store's timeout.
	// The write goes on; its outcome is unknown to the member, as after a
	// lost answer.
	ctx, cancel := context.WithTimeoutCause(r.Context(), f.heartbeatWait(r)+f.forwardBound(), errStoreSlow)
	defer cancel()
	r = r.WithContext(ctx)
	answer := &bufferedAnswer{under: w, header: http.Header{}}
	f.serveLocal(answer, r, forwardedBy, true)
	if errors.Is(context.Cause(ctx), errStoreSlow) {
		f.unsure(w, r, protocol.CodeReplicaLeaseUncertain, fmt.Sprintf("replica %s did not answer within %v: its etcd store did not commit in time", f.self, f.forwardBound()))
		return
	}
	if served := rep.runs(prefix); !rep.node.Valid() || served != servedBefore {
		f.unsure(w, r, protocol.CodeReplicaLeaseUncertain, fmt.Sprintf("replica %s is no longer certain to run stream %q (its etcd lease)", f.self, prefix))
		return
	}
	for k, v := range answer.header {
		w.Header()[k] = v
	}
	w.WriteHeader(cmp.Or(answer.status, http.StatusOK))
	_, _ = w.Write(answer.body.Bytes())
}

// bufferedAnswer is an http.ResponseWriter that keeps the answer, for
// serveHeartbeat to send or replace.
type bufferedAnswer struct {
	// under is the connection's writer, reached through Unwrap by
	// http.ResponseController: a held answer moves its write deadline.
	under  http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedAnswer) Header() http.Header { return b.header }

// Unwrap is the connection's writer, for http.ResponseController.
func (b *bufferedAnswer) Unwrap() http.ResponseWriter { return b.under }

func (b *bufferedAnswer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedAnswer) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// forward sends the request to the replica at advertise, which runs its
// stream, and its answer back.
func (f *Front) forward(w http.ResponseWriter, r *http.Request, advertise string) {
	long := longCall(r)
	p, err := f.proxy(advertise, long)
	if err != nil {
		f.unsure(w, r, protocol.CodeReplicaNotOwner, err.Error())
		return
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/heartbeat") && heartbeatPath.MatchString(r.URL.Path) {
		// Keep the start of the body: the answer RETRY echoes its requestId
		// when the owner cannot be reached.
		if r, err = keepHeartbeatHead(r); err != nil {
			f.unsure(w, r, protocol.CodeStoreUnavailable, err.Error())
			return
		}
		// A heartbeat waits for the owner what it asks to be held and the
		// forwarding bound more, never longer: a frozen owner must not
		// hold a member's heartbeat for a part of its lease that matters.
		ctx, cancel := context.WithTimeoutCause(r.Context(), f.heartbeatWait(r)+f.forwardBound(), errOwnerSlow)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if long {
		// The owner may answer after the server's write timeout.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(f.group.HandOffBound() + longCallSlack))
	}
	p.ServeHTTP(w, r)
}

// longCallSlack is how long a long call's answer may take beyond the
// hand-off bound: the work itself and the audit write.
const longCallSlack = 30 * time.Second

// longCall reports whether r may wait for members to hand shards off: an
// offsets reset, which with force holds the shards out of the assignment
// until their readers let go, at most the group's hand-off bound.
func longCall(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/offsets/reset")
}

// keepHeartbeatHead reads the start of a heartbeat's body into its context
// (bufferedBodyKey), for a RETRY that echoes its requestId, and leaves the
// body to read whole as before.
func keepHeartbeatHead(r *http.Request) (*http.Request, error) {
	if r.Body == nil {
		return r, nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, maxBufferedHeartbeat))
	if err != nil {
		return r, fmt.Errorf("reading the heartbeat: %w", err)
	}
	r = r.WithContext(context.WithValue(r.Context(), bufferedBodyKey{}, head))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return r, nil
}

// clientAddress drops clientAddressHeader from r and, when its signature
// is a replica's, returns r with the client address it names.
func (f *Front) clientAddress(r *http.Request) *http.Request {
	v := r.Header.Get(clientAddressHeader)
	if v == "" {
		return r
	}
	r.Header.Del(clientAddressHeader)
	// The signature covers the forwarding headers as the forwarding
	// replica received them: without the hop it appended.
	received := r.Header.Clone()
	dropLastHop(received, claimed(v))
	addr, ok := f.peers.verify(v, forwardedOf(received), time.Now())
	if !ok {
		f.log.Debug("unsigned, stale or replayed client address header ignored", slog.String("remote", r.RemoteAddr))
		return r
	}
	r = r.WithContext(r.Context()) // a shallow copy: the caller's request stays as it was
	r.Header = received
	r.RemoteAddr = addr
	return r
}

// forwardedForHeader is the header proxies name the client in, each
// appending the address it took the request from; realIPHeader is the one
// a single proxy names it in.
const (
	forwardedForHeader = "X-Forwarded-For"
	realIPHeader       = "X-Real-IP"
)

// appendForwardedFor sets out's X-Forwarded-For to in's with peer's IP
// appended, as httputil.ProxyRequest.SetXForwarded does.
func appendForwardedFor(out, in http.Header, peer string) {
	ip, _, err := net.SplitHostPort(peer)
	if err != nil {
		return
	}
	if prior := in.Values(forwardedForHeader); len(prior) > 0 {
		ip = strings.Join(prior, ", ") + ", " + ip
	}
	out.Set(forwardedForHeader, ip)
}

// dropLastHop removes from h's X-Forwarded-For the address the forwarding
// replica appended, the peer it signed: the owner then reads the
// forwarding headers as that replica received them, and finds the client
// as it would have (trusting them only when the peer is a trusted proxy).
func dropLastHop(h http.Header, peer string) {
	ip, _, err := net.SplitHostPort(peer)
	v := h.Values(forwardedForHeader)
	if err != nil || len(v) == 0 {
		return
	}
	hops := strings.Split(strings.Join(v, ","), ",")
	if strings.TrimSpace(hops[len(hops)-1]) != ip {
		return
	}
	if hops = hops[:len(hops)-1]; len(hops) == 0 {
		h.Del(forwardedForHeader)
		return
	}
	h.Set(forwardedForHeader, strings.Join(hops, ","))
}

// bufferedBodyKey holds the start of a forwarded heartbeat's body in its
// request's context.
type bufferedBodyKey struct{}

// proxy is the reverse proxy to one replica, made once per advertise URL.
func (f *Front) proxy(advertise string, long bool) (*httputil.ReverseProxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, transport := advertise, f.transport
	if long {
		key, transport = advertise+" long", f.longTransport
	}
	if p, ok := f.proxies[key]; ok {
		return p, nil
	}
	target, err := url.Parse(advertise)
	if err != nil {
		return nil, fmt.Errorf("owner advertise URL %q: %w", advertise, err)
	}
	p := &httputil.ReverseProxy{
		Transport:  transport,
		BufferPool: &f.buffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The client's X-Forwarded-For goes on with the address this
			// replica took the request from appended, as any proxy does.
			if v := pr.In.Header.Values(forwardedForHeader); len(v) > 0 {
				pr.Out.Header[forwardedForHeader] = slices.Clone(v)
			}
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedByHeader, f.self)
			pr.Out.Header.Del(clientAddressHeader)
			if signed, ok := f.peers.sign(pr.In.RemoteAddr, forwardedOf(pr.In.Header), time.Now()); ok {
				pr.Out.Header.Set(clientAddressHeader, signed)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set(ForwardedByHeader, f.self)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(context.Cause(r.Context()), errOwnerSlow) {
				f.unsure(w, r, protocol.CodeReplicaNotOwner, fmt.Sprintf("the owner %s did not answer within %v", advertise, f.forwardBound()))
				return
			}
			if r.Context().Err() != nil {
				return // the caller went away: nobody reads an answer
			}
			f.unsure(w, r, protocol.CodeReplicaNotOwner, fmt.Sprintf("the owner %s did not answer: %v", advertise, err))
		},
		ErrorLog: slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
	f.proxies[key] = p
	return p, nil
}

// unsure answers a request that this replica cannot serve right now,
// with code saying why (docs/protocol.md §5.7): a heartbeat RETRY in a 200
// (the member keeps its shards and heartbeats again, here or at its next
// coordinator URL), anything else 503 with Retry-After.
func (f *Front) unsure(w http.ResponseWriter, r *http.Request, code protocol.ErrorCode, why string) {
	w.Header().Set(ForwardedByHeader, f.self)
	m := heartbeatPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, protocol.NewErrorBody(code, why+"; retry, or another coordinator URL"))
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
	resp.ErrorCode = code
	writeJSON(w, http.StatusOK, resp)
}

// unsureDetached answers a request while no coordinator runs here, with
// the reason the server last set (SetDetached).
func (f *Front) unsureDetached(w http.ResponseWriter, r *http.Request) {
	d := f.detached.Load()
	if d == nil {
		d = &detachedReason{code: protocol.CodeReplicaJoining, why: "joining the cluster"}
	}
	f.unsure(w, r, d.code, fmt.Sprintf("replica %s runs no coordinator right now (%s)", f.self, d.why))
}

// detachedReason is why no coordinator runs on this replica.
type detachedReason struct {
	code protocol.ErrorCode
	why  string
}

// SetDetached says why no coordinator runs here while none does: code
// CodeReplicaJoining while the replica joins, CodeReplicaLeaseUncertain
// after it lost its lease and until it joined again.
func (f *Front) SetDetached(code protocol.ErrorCode, why string) {
	f.detached.Store(&detachedReason{code: code, why: why})
}

// errOwnerSlow ends a forwarded heartbeat the owner did not answer within
// the forwarding bound.
var errOwnerSlow = errors.New("the owner did not answer within the forwarding bound")

// errStoreSlow ends a heartbeat this replica did not answer within the
// forwarding bound.
var errStoreSlow = errors.New("the heartbeat was not answered within the forwarding bound")

// forwardBound is how much longer than it asks to be held a forwarded
// heartbeat waits for the owner: min(1 s, member lease / 6), well inside
// the member's lease.
func (f *Front) forwardBound() time.Duration {
	return min(time.Second, f.group.MemberLease/6)
}

// heartbeatWait is how long the forwarded heartbeat r asks to be held
// (waitMs), at most the heartbeat interval, as the owner holds it.
func (f *Front) heartbeatWait(r *http.Request) time.Duration {
	head, _ := r.Context().Value(bufferedBodyKey{}).([]byte)
	var req struct {
		WaitMs int64 `json:"waitMs"`
	}
	if json.Unmarshal(head, &req) != nil || req.WaitMs <= 0 {
		return 0
	}
	return min(time.Duration(req.WaitMs)*time.Millisecond, f.group.HeartbeatInterval)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
