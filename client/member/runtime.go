package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/coordclient"
)

// Runtime runs the logical members of one process for one stream and
// consumer group. Create it with [New] and run it once with [Runtime.Run].
type Runtime struct {
	cfg        config
	handler    Handler
	batch      BatchHandler
	ran        atomic.Bool
	instanceID string
	board      *board
	stats      *statsBoard
}

// New checks opts (all problems are reported at once) and returns a
// Runtime that will call handler for every record its members read.
// Nothing is started before Run.
func New(handler Handler, opts ...Opt) (*Runtime, error) {
	cfg, err := newConfig(opts)
	if handler == nil {
		err = errors.Join(err, errors.New("member: a handler is required"))
	}
	if err != nil {
		return nil, err
	}
	return newRuntime(cfg, handler, nil), nil
}

// NewBatch is [New] with a [BatchHandler]: each call gets the records of
// one shard that were read together (up to WithBatch), in stream order.
// Shards still rotate over the workers, one batch per turn.
func NewBatch(handler BatchHandler, opts ...Opt) (*Runtime, error) {
	cfg, err := newConfig(opts)
	if handler == nil {
		err = errors.Join(err, errors.New("member: a batch handler is required"))
	}
	if err != nil {
		return nil, err
	}
	return newRuntime(cfg, nil, handler), nil
}

func newRuntime(cfg config, handler Handler, batch BatchHandler) *Runtime {
	r := &Runtime{cfg: cfg, handler: handler, batch: batch, instanceID: newInstanceID(), stats: &statsBoard{}}
	r.board = newBoard(r.MemberIDs())
	return r
}

// Stream is the stream prefix the Runtime reads.
func (r *Runtime) Stream() string { return r.cfg.stream }

// Group is the consumer group the Runtime's members belong to.
func (r *Runtime) Group() string { return r.cfg.group }

// InstanceID is the random incarnation id this Runtime sends on every
// heartbeat (docs/protocol.md, member incarnations): the coordinator tells
// this process from another one using the same member ids by it.
func (r *Runtime) InstanceID() string { return r.instanceID }

// MemberIDs are the ids of the Runtime's logical members, "{base}-m0" …,
// which are also their Redis consumer names.
func (r *Runtime) MemberIDs() []string {
	ids := make([]string, r.cfg.concurrency)
	for i := range ids {
		ids[i] = memberID(r.cfg.baseID, i)
	}
	return ids
}

// runState is what one Run shares with its member actors. Read-only after
// Run built it, except the channel.
type runState struct {
	cfg     *config
	handler Handler
	batch   BatchHandler
	stats   *statsBoard
	system  *actor.ActorSystem
	client  *coordclient.Client
	acker   *acker
	hooks   *hooks
	exits   chan memberExit
	board   *board
	// requestTimeout bounds one heartbeat request: a third of the lease
	// (so a hung request cannot use the whole lease), at least 500ms.
	requestTimeout time.Duration
	// nonce makes request ids unique across runs of one member id.
	nonce string
	// instanceID names this Runtime's incarnation on every heartbeat
	// (docs/protocol.md, member incarnations).
	instanceID string
	// requestSeq numbers the heartbeats of this incarnation (requestSeq):
	// one sequence for all its members, so that a member actor restarted
	// after a panic goes on above what it sent before.
	requestSeq atomic.Int64
	// leaseWarned: the warning about a coordinator lease that differs from
	// WithMemberLease was logged (once per Runtime).
	leaseWarned atomic.Bool
}

// probeTimeout bounds the XACKDEL probe at the start of Run.
const probeTimeout = 5 * time.Second

// Run joins the group with every logical member and reads until ctx is
// cancelled; then every member leaves gracefully and Run returns. It
// returns an error when a member had to stop for what no retry heals, and
// the other members then leave too: *StreamNotFoundError (the coordinator
// does not know the stream), *GroupNotFoundError, *AuthError (credentials
// missing, refused or without the MEMBER role) and *ProtocolError
// (UNSUPPORTED_PROTOCOL or INVALID_REQUEST); find them with errors.As.
// Run may be called once.
//
// Start-up, in order:
//
//  1. probe the server once for XACKDEL (AckDel falls back to a script);
//  2. start an actor system whose logs go to the Runtime's logger;
//  3. spawn one member actor per logical member: each starts its workers
//     and sends its join heartbeat; shards start when granted.
//
// Shutdown, in order, all of it bounded by WithLeaveTimeout counted from
// when ctx ended (default 25s, which fits Kubernetes' default grace period
// of 30s):
//
//  1. every member stops reading all its shards, hands back the records
//     read and not handled yet, waits for its running handlers (until a
//     quarter of the leave timeout, at most 5s, is left; then they are
//     abandoned and their ACKs fail), sends its queued acks and reports
//     the shards REVOKED;
//  2. every member sends its leave heartbeat (memberEpoch -1); Run waits
//     for all of them;
//  3. the member actors stop: each closes its ACK gates, cancels handler
//     contexts and its heartbeat, waits for its workers, but not past the
//     leave timeout, then its shard actors, each of which waits for its
//     read loop (a blocking read is interrupted; only a client without a
//     read connection, see WithRedis, may make it wait up to WithBlock);
//  4. the actor system shuts down, and the idle connections of the
//     Runtime's own HTTP client are closed.
//
// A handler that ignores its cancelled context is abandoned: Run returns
// while it may still be running (its ACKs fail), and its goroutine ends
// only when it returns.
func (r *Runtime) Run(ctx context.Context) error {
	if !r.ran.CompareAndSwap(false, true) {
		return errors.New("member: Run may be called once per Runtime")
	}
	cfg := &r.cfg
	log := cfg.log.With(slog.String("stream", cfg.stream), slog.String("group", cfg.group))
	cfg.log = log

	// 1. XACKDEL probe.
	// Without ctx's cancellation: a Run whose context is already done
	// still starts, and leaves at once.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	ack, err := newAcker(pctx, cfg.rdb)
	cancel()
	if err != nil {
		log.Warn("AckDel uses XACK+XDEL in a script", slog.Any("error", err))
	}

	// 2. Actor system.
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With(slog.String("component", "protoactor"))
	}))
	rs := &runState{
		cfg: cfg, handler: r.handler, batch: r.batch, stats: r.stats, system: system, client: cfg.client, acker: ack,
		hooks:          &hooks{h: cfg.hooks, onAssigned: cfg.onAssigned, onRevoked: cfg.onRevoked, log: log},
		exits:          make(chan memberExit, cfg.concurrency),
		board:          r.board,
		requestTimeout: max(cfg.memberLease/3, 500*time.Millisecond),
		nonce:          strconv.FormatInt(time.Now().UnixMilli(), 36),
		instanceID:     r.instanceID,
	}
	log.Info("member runtime starting", slog.Any("coordinator", cfg.client.URLs()),
		slog.Any("members", r.MemberIDs()), slog.String("baseIdFrom", cfg.baseIDFrom), slog.String("instanceId", rs.instanceID),
		slog.Bool("xackdel", ack.native))

	// 3. Member actors.
	pids := make([]*actor.PID, 0, cfg.concurrency)
	var errs []error
	for _, id := range r.MemberIDs() {
		props := actor.PropsFromProducer(newMemberActor(rs, id))
		pid, err := system.Root.SpawnNamed(props, "member-"+id)
		if err != nil {
			errs = append(errs, fmt.Errorf("member: start member %s: %w", id, err))
			break
		}
		pids = append(pids, pid)
	}

	// Run until ctx is done or a member fails.
	exited := 0
	if len(errs) == 0 {
		select {
		case <-ctx.Done():
		case ex := <-rs.exits:
			exited++
			if ex.err != nil {
				errs = append(errs, ex.err)
			}
		}
	}

	// Shutdown 1 and 2: drain and leave, everything over by stopBy.
	stopBy := time.Now().Add(cfg.leaveTimeout)
	for _, pid := range pids {
		system.Root.Send(pid, &leaveMsg{by: stopBy})
	}
	// The leave waits for the drain (it ends leaveReserve before stopBy),
	// then for reads in progress (interrupted), then for its answer; what
	// is left of the reserve stops the workers and actors.
	bound := time.NewTimer(max(time.Until(stopBy)-leaveReserve(cfg.leaveTimeout)/4, 0))
wait:
	for exited < len(pids) {
		select {
		case ex := <-rs.exits:
			exited++
			if ex.err != nil {
				errs = append(errs, ex.err)
			}
		case <-bound.C:
			log.Error("members did not finish leaving in time; stopping them", slog.Int("left", exited), slog.Int("members", len(pids)))
			break wait
		}
	}
	bound.Stop()

	// Shutdown 3: member actors (and their shard actors).
	futures := make([]*actor.Future, len(pids))
	for i, pid := range pids {
		futures[i] = system.Root.StopFuture(pid)
	}
	for i, f := range futures {
		if err := f.Wait(); err != nil {
			log.Error("member actor did not stop in time", slog.String("pid", pids[i].Id), slog.Any("error", err))
		}
	}

	// Shutdown 4: the actor system and the HTTP client's connections.
	system.Shutdown()
	if cfg.ownHTTP {
		cfg.httpClient.CloseIdleConnections()
	}
	log.Info("member runtime stopped")
	if len(errs) > 0 {
		return fmt.Errorf("member: run: %w", errors.Join(errs...))
	}
	return nil
}
