package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/persistence"
)

// The placement unit of the cluster mode is a stream: its record, its
// migration work and every group of it. A scale changes the stream record
// and every group of the stream in one migration step run by the stream's
// actor, which asks its group actors; one replica therefore runs a stream
// with all its groups (docs/protocol-notes.md, cluster mode).

// streamUnit is the placement unit of a stream.
func streamUnit(prefix string) string { return persistence.StreamUnit(prefix) }

// unitStream is the stream of a store unit: a stream's ("stream/p") or a
// group's ("group/p/g").
func unitStream(unit string) (string, bool) {
	if p, ok := strings.CutPrefix(unit, "stream/"); ok && p != "" && !strings.Contains(p, "/") {
		return p, true
	}
	if rest, ok := strings.CutPrefix(unit, "group/"); ok {
		if p, g, ok := strings.Cut(rest, "/"); ok && p != "" && g != "" {
			return p, true
		}
	}
	return "", false
}

// streamKeys lists the stored streams without reading them.
type streamKeys interface {
	StreamPrefixes(ctx context.Context) ([]string, error)
}

// reconcileEvery is how often a replica compares what it runs with what
// placement asks, besides every change of the replicas or owner keys.
const reconcileEvery = 2 * time.Second

// unknownStreamGrace is how long a replica keeps a claimed stream that the
// store does not hold (claimed for a request that was to create it).
const unknownStreamGrace = 10 * time.Second

// Runner is this process's place in the cluster mode: the etcd client,
// the cluster node, and the streams it runs. It claims the streams placed
// on it (rendezvous hashing over the live replicas), loads each after its
// claim, and drops each before releasing it: a stream runs on one replica
// at a time, and its writes are fenced by its owner key.
type Runner struct {
	cli   *clientv3.Client
	node  *cluster.Node
	log   *slog.Logger
	front *Front

	// coord and store are set while the coordinator runs.
	coord atomic.Pointer[coordinatorRef]
	store persistence.Store
	// keys lists the stored streams by their keys (the gauges).
	keys  streamKeys
	moves *prometheus.CounterVec

	// credible tells whether a request's credentials may be good (nil:
	// any may); see credentialCheck. Set before the front routes here.
	credible func(*http.Request) bool

	// refused holds the streams whose writes etcd refused (the owner key
	// is gone) until the placement loop drops them; refusedSignal wakes
	// the loop (capacity 1). A set, not a bounded queue: however many
	// streams lose their keys at once, none is forgotten, and one that
	// was not dropped would keep answering write-free heartbeats OK.
	rmu           sync.Mutex
	refused       map[string]struct{} // guarded by rmu
	refusedSignal chan struct{}

	// mu serializes claims and releases.
	mu sync.Mutex
	// serving maps each stream whose actors run here to when it was
	// claimed; guarded by smu.
	smu     sync.RWMutex
	serving map[string]time.Time

	// stopLoops ends the placement loop and the gauges place started, and
	// loops waits for them: close stops them before it closes the etcd
	// client they use.
	stopLoops context.CancelFunc
	loops     sync.WaitGroup

	leaveOnce, closeOnce sync.Once
	leaveErr, closeErr   error
}

// Coordinator is what the placement loop needs of the coordinator
// (actors.Coordinator): it loads a claimed stream's actors and stops them
// before the claim is released.
type Coordinator interface {
	AddStream(ctx context.Context, prefix string) error
	DropStream(ctx context.Context, prefix string) error
	Streams() []string
}

// coordinatorRef holds a Coordinator in an atomic.Pointer.
type coordinatorRef struct{ Coordinator }

// Metrics is what a Runner publishes to (gateway/metrics.Metrics): its
// placement counter and the cluster gauges.
type Metrics interface {
	Registry() *prometheus.Registry
	SetClusterReplicasLive(n int)
	SetClusterGroupsUnowned(n int)
	SetClusterStoreUnreadable()
}

// NewRunner is this process's place in the cluster on node, whose etcd
// client cli it closes in Close; f is the front it routes for.
func NewRunner(cli *clientv3.Client, node *cluster.Node, log *slog.Logger, f *Front) *Runner {
	return &Runner{cli: cli, node: node, log: log, front: f, refused: map[string]struct{}{}, refusedSignal: make(chan struct{}, 1), serving: map[string]time.Time{}}
}

// isServing reports whether the stream's actors run here.
func (r *Runner) isServing(prefix string) bool {
	r.smu.RLock()
	defer r.smu.RUnlock()
	_, ok := r.serving[prefix]
	return ok
}

func (r *Runner) setServing(prefix string, on bool) {
	r.smu.Lock()
	defer r.smu.Unlock()
	if on {
		r.serving[prefix] = time.Now()
	} else {
		delete(r.serving, prefix)
	}
}

// servingSince is when the stream was claimed; ok false if it does not run
// here.
func (r *Runner) servingSince(prefix string) (time.Time, bool) {
	r.smu.RLock()
	defer r.smu.RUnlock()
	t, ok := r.serving[prefix]
	return t, ok
}

// coordinator is the coordinator Place was given, nil before.
func (r *Runner) coordinator() Coordinator {
	if ref := r.coord.Load(); ref != nil {
		return ref.Coordinator
	}
	return nil
}

// refusedWrite is told by the store of every write of a stream etcd
// refused: this replica no longer owns the stream, whose actors stop.
func (r *Runner) refusedWrite(prefix string) {
	r.rmu.Lock()
	r.refused[prefix] = struct{}{}
	r.rmu.Unlock()
	select {
	case r.refusedSignal <- struct{}{}:
	default: // a wake-up is pending: it takes this stream too
	}
}

// takeRefused returns, sorted, and forgets the streams refusedWrite
// collected.
func (r *Runner) takeRefused() []string {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	out := slices.Sorted(maps.Keys(r.refused))
	clear(r.refused)
	return out
}

// dropRefused drops each stream whose write etcd refused, if it runs here.
// Checked under r.mu: a refusal seen while ensure loads the stream is
// acted on once ensure has marked it served, not lost.
func (r *Runner) dropRefused(ctx context.Context) {
	for _, p := range r.takeRefused() {
		r.mu.Lock()
		if r.isServing(p) {
			r.dropLocked(ctx, p, "the store refused a write: the owner key is gone")
		}
		r.mu.Unlock()
	}
}

// runs reports whether the stream's actors run here under an owner key
// this replica still holds. A stream served without its key (deleted while
// the lease runs: the watch saw it go, see cluster.Node.FenceOf) is handed
// to the placement loop to drop, as after a refused write: its writes
// would be refused, but a heartbeat that writes nothing would still be
// answered from it while another replica may have claimed and loaded it.
func (r *Runner) runs(prefix string) bool {
	if !r.isServing(prefix) {
		return false
	}
	if _, ok := r.node.FenceOf(streamUnit(prefix)); ok {
		return true
	}
	r.refusedWrite(prefix)
	return false
}

// live reports whether id is a registered replica.
func (r *Runner) live(id string) bool {
	return slices.ContainsFunc(r.node.Replicas(), func(rep cluster.Replica) bool { return rep.ID == id })
}

// route says where a request about the stream is answered: here (local),
// by another replica (to), or nowhere right now (err: the caller answers
// RETRY / 503). A request another replica forwarded is never forwarded
// again: two replicas with different views of etcd would bounce it.
func (r *Runner) route(req *http.Request, prefix string, forwarded, creates bool) (local bool, to cluster.Replica, err error) {
	ctx := req.Context()
	if !r.node.Valid() {
		return false, to, refuse(protocol.CodeReplicaLeaseUncertain, "replica %s is not certain of its etcd lease", r.node.Self().ID)
	}
	if r.isServing(prefix) {
		if !r.runs(prefix) {
			return false, to, refuse(protocol.CodeReplicaNotOwner, "replica %s no longer holds the owner key of stream %q", r.node.Self().ID, prefix)
		}
		return true, to, nil
	}
	self := r.node.Self().ID
	unit := streamUnit(prefix)
	holder, held := r.node.Holder(unit)
	switch {
	case held && holder.ID != self:
		if !r.live(holder.ID) {
			return false, to, refuse(protocol.CodeReplicaNotOwner, "the owner %s of stream %q is gone (ownership is moving)", holder.ID, prefix)
		}
		if forwarded {
			return false, to, refuse(protocol.CodeReplicaNotOwner, "stream %q is owned by %s, not by this replica (ownership is moving)", prefix, holder.ID)
		}
		return false, holder, nil
	}
	placed, ok := r.node.PlacedOn(unit)
	switch {
	case !ok:
		return false, to, refuse(protocol.CodeReplicaNotOwner, "no live replica")
	case placed.ID != self && held:
		return false, to, refuse(protocol.CodeReplicaNotOwner, "stream %q is moving from this replica to %s", prefix, placed.ID)
	case placed.ID != self && forwarded:
		return false, to, refuse(protocol.CodeReplicaNotOwner, "stream %q is placed on %s, not on this replica (ownership is moving)", prefix, placed.ID)
	case placed.ID != self:
		return false, placed, nil
	}
	// Placed here and held by nobody (a new stream, or one whose owner
	// just left): claim it now rather than at the next round. Not for a
	// name the store does not hold, unless the request creates it: a claim
	// is an etcd write, kept for unknownStreamGrace, and a request about a
	// stream that does not exist (a typo, a scan of names, one not yet
	// authenticated) must not cost one. It is answered here: not found.
	// Nor does a request whose credentials cannot be good cost the read
	// that tells: routing runs before the gateway checks them, and it
	// refuses such a request here whatever the store holds.
	if !creates && r.credible != nil && !r.credible(req) {
		return true, to, nil
	}
	if !creates {
		if stored, err := r.stored(ctx, prefix); err != nil || !stored {
			if err != nil {
				err = &refusal{code: protocol.CodeReplicaLeaseUncertain, err: err}
			}
			return err == nil, to, err
		}
	}
	if err := r.ensure(ctx, prefix); err != nil {
		code := protocol.CodeReplicaLeaseUncertain // etcd did not answer the claim or the load
		if errors.Is(err, cluster.ErrHeld) {
			code = protocol.CodeReplicaNotOwner
		}
		return false, to, &refusal{code: code, err: err}
	}
	return true, to, nil
}

// refusal is why a replica cannot serve a request about a stream now,
// with the error code that tells the client another replica may
// (docs/protocol.md §5.7).
type refusal struct {
	code protocol.ErrorCode
	err  error
}

func (e *refusal) Error() string { return e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }

// refuse is a refusal with code, its message formatted.
func refuse(code protocol.ErrorCode, format string, args ...any) error {
	return &refusal{code: code, err: fmt.Errorf(format, args...)}
}

// codeOf is the error code of a refusal; CodeReplicaNotOwner for any
// other error of routing.
func codeOf(err error) protocol.ErrorCode {
	if r, ok := errors.AsType[*refusal](err); ok {
		return r.code
	}
	return protocol.CodeReplicaNotOwner
}

// stored reports whether the store holds the stream (its key alone is
// read).
func (r *Runner) stored(ctx context.Context, prefix string) (bool, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	prefixes, err := r.keys.StreamPrefixes(lctx)
	if err != nil {
		return false, fmt.Errorf("listing the stored streams: %w", err)
	}
	return slices.Contains(prefixes, prefix), nil
}

// ensure claims the stream and starts its actors, loaded after the claim,
// unless they run here already.
//
// The fence is the owner key, not the run: a dropped run's write would
// pass it if this replica still held (or adopted again, after a failed
// release) the same key. None can: writes are made only inside the
// actors' handlers, synchronously, and AddStream refuses a new run until
// every actor of the dropped one has stopped, so no write of it starts or
// is awaited after the new run loads. What is left is a write whose
// outcome its actor never learned (a timeout while etcd still applies
// it): its answer was RETRY, so the state it holds was never told, the
// same as any unknown outcome; and after a new claim its create revision
// no longer matches.
func (r *Runner) ensure(ctx context.Context, prefix string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isServing(prefix) {
		return nil
	}
	coord := r.coordinator()
	if coord == nil {
		return errors.New("the coordinator of this replica is not running")
	}
	unit := streamUnit(prefix)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.node.Claim(cctx, unit); err != nil {
		return err
	}
	if err := coord.AddStream(cctx, prefix); err != nil {
		r.log.Warn("claimed stream failed to load: releasing it", slog.String("stream", prefix), slog.Any("error", err))
		_ = coord.DropStream(cctx, prefix)
		return errors.Join(err, r.node.Release(cctx, unit))
	}
	r.setServing(prefix, true)
	r.moved("claimed")
	r.log.Info("stream claimed", slog.String("stream", prefix))
	return nil
}

// drop stops the stream's actors and then releases its owner key.
func (r *Runner) drop(ctx context.Context, prefix, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(ctx, prefix, why)
}

// dropLocked is drop; the caller holds r.mu.
func (r *Runner) dropLocked(ctx context.Context, prefix, why string) {
	r.setServing(prefix, false)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if coord := r.coordinator(); coord != nil {
		if err := coord.DropStream(cctx, prefix); err != nil {
			// Its writes are fenced: once the key is gone none lands.
			r.log.Warn("stream actors did not stop in time", slog.String("stream", prefix), slog.Any("error", err))
		}
	}
	if err := r.node.Release(cctx, streamUnit(prefix)); err != nil {
		r.log.Warn("release failed; the owner key lapses with the lease", slog.String("stream", prefix), slog.Any("error", err))
	}
	r.moved("released")
	r.log.Info("stream released", slog.String("stream", prefix), slog.String("reason", why))
}

func (r *Runner) moved(direction string) {
	if r.moves != nil {
		r.moves.WithLabelValues(direction).Inc()
	}
}

// place runs the coordinator's placement, and publishes the cluster
// gauges, until ctx ends or the replica closes: at the start, on every
// change of the replicas or owner keys, on a refused write and every
// reconcileEvery, it claims the streams placed here and releases the
// others.
func (r *Runner) Place(ctx context.Context, coord Coordinator, store persistence.Store, m Metrics) error {
	r.store = store
	r.moves = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rscoord_cluster_placement_moves_total",
		Help: "Streams (each with all its groups) this replica claimed or released (cluster mode)."}, []string{"direction"})
	if err := m.Registry().Register(r.moves); err != nil {
		return err
	}
	r.coord.Store(&coordinatorRef{coord})
	ctx, r.stopLoops = context.WithCancel(ctx)
	r.loops.Go(func() { r.publishGauges(ctx, m) })
	r.loops.Go(func() {
		tick := time.NewTicker(reconcileEvery)
		defer tick.Stop()
		for {
			r.reconcile(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-r.node.Changes():
			case <-r.node.OwnerChanges():
			case <-r.refusedSignal:
				r.dropRefused(ctx)
			}
		}
	})
	return nil
}

// reconcile is one round of placement.
func (r *Runner) reconcile(ctx context.Context) {
	if !r.node.Valid() {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	streams, err := r.store.LoadStreams(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("placement: listing streams failed", slog.Any("error", err))
		}
		return
	}
	// A stream whose owner key was deleted under it is dropped before the
	// plan: placed here still, it is claimed again and loaded afresh.
	r.smu.RLock()
	served := slices.Collect(maps.Keys(r.serving))
	r.smu.RUnlock()
	for _, p := range served {
		r.mu.Lock()
		if _, held := r.node.FenceOf(streamUnit(p)); r.isServing(p) && !held {
			r.dropLocked(ctx, p, "its owner key was deleted while this replica held it")
		}
		r.mu.Unlock()
	}
	units := make([]string, 0, len(streams))
	known := map[string]bool{}
	for _, rec := range streams {
		units = append(units, streamUnit(rec.StreamPrefix))
		known[rec.StreamPrefix] = true
	}
	held := r.node.Held()
	claim, release := cluster.Plan(r.node.Self().ID, units, held, r.node.Replicas())
	for _, u := range held {
		p, ok := unitStream(u)
		if !ok || known[p] || slices.Contains(release, u) {
			continue
		}
		// Claimed for a create that never came: nothing to run. Checked
		// under r.mu, so that a claim in progress is not taken for one.
		r.mu.Lock()
		since, serving := r.servingSince(p)
		if coord := r.coordinator(); coord != nil && slices.Contains(r.node.Held(), u) &&
			(!serving || time.Since(since) > unknownStreamGrace) && !slices.Contains(coord.Streams(), p) {
			r.dropLocked(ctx, p, "claimed for a stream the store does not hold")
		}
		r.mu.Unlock()
	}
	for _, u := range release {
		if p, ok := unitStream(u); ok {
			r.drop(ctx, p, "placed on another replica")
		}
	}
	r.settleStrays(ctx, known)
	for _, u := range claim {
		p, ok := unitStream(u)
		if !ok || ctx.Err() != nil {
			continue
		}
		if err := r.ensure(ctx, p); err != nil {
			if errors.Is(err, cluster.ErrHeld) {
				r.log.Debug("placement: stream still held by its previous owner", slog.String("stream", p))
				continue
			}
			r.log.Warn("placement: claiming a stream failed", slog.String("stream", p), slog.Any("error", err))
		}
	}
}

// settleStrays deals with the owner keys bound to this replica that it
// does not know it holds (a claim whose answer was lost, or that etcd
// carried out after the claim gave up): nobody else can claim those while
// this replica lives, so a stream placed here is claimed (adopting the
// key) and any other is released. Strays are listed under r.mu, so that a
// claim in progress (ensure) is not taken for one.
func (r *Runner) settleStrays(ctx context.Context, known map[string]bool) {
	var adopt []string
	r.mu.Lock()
	for _, u := range r.node.Strays() {
		p, ok := unitStream(u)
		if !ok || ctx.Err() != nil {
			continue
		}
		if placed, ok := r.node.PlacedOn(u); ok && placed.ID == r.node.Self().ID && known[p] {
			adopt = append(adopt, p)
			continue
		}
		// Deleted only while bound to this lease: a key of a previous run
		// under this id lapses with that run's lease instead.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := r.node.Release(cctx, u); err != nil {
			r.log.Warn("placement: releasing a stray owner key failed", slog.String("stream", p), slog.Any("error", err))
		} else {
			r.log.Debug("placement: stray owner key released", slog.String("stream", p))
		}
		cancel()
	}
	r.mu.Unlock()
	for _, p := range adopt {
		if err := r.ensure(ctx, p); err != nil && !errors.Is(err, cluster.ErrHeld) {
			r.log.Warn("placement: adopting a stray owner key failed", slog.String("stream", p), slog.Any("error", err))
		}
	}
}

// leave stops the placement loop and the gauges and waits for them, then
// gives every stream up (SIGTERM: the others take over at once instead of
// one lease later) and leaves the cluster. The etcd client stays open: the
// actors may still write (refused now, a certain outcome) and read until
// they stop, and the store uses the client until it closes; close closes
// it after that. Later calls return the first call's error.
func (r *Runner) Leave(ctx context.Context) error {
	r.leaveOnce.Do(func() {
		if r.stopLoops != nil {
			r.stopLoops()
		}
		r.loops.Wait()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r.smu.Lock()
		clear(r.serving)
		r.smu.Unlock()
		r.leaveErr = r.node.Leave(ctx)
		r.front.rep.CompareAndSwap(r, nil)
	})
	return r.leaveErr
}

// close leaves the cluster (leave), if that has not been done, and closes
// the etcd client: call it once the coordinator and the store are closed.
// Later calls return the first call's error.
func (r *Runner) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.closeErr = errors.Join(r.Leave(ctx), r.cli.Close())
	})
	return r.closeErr
}
