package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// Opt configures a [Runtime]. Options are applied in order by [New], which
// then fills defaults and checks every value and combination at once,
// reporting all problems in one error.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// Limits of the numeric options.
const (
	// MaxConcurrency is the largest listener concurrency (logical members
	// per Runtime).
	MaxConcurrency = 1024
	// MaxWorkers is the largest number of workers of one logical member.
	MaxWorkers = 4096
	// MaxBatch is the largest COUNT of one read.
	MaxBatch = 10_000
	// MaxRedisFailureLimit is the largest WithRedisFailureLimit.
	MaxRedisFailureLimit = 1000
	// MaxHandlerAttempts is the most attempts of WithHandlerRetry.
	MaxHandlerAttempts = 1000
)

// config is the checked configuration of a Runtime. Only New writes it;
// afterwards it is read-only and shared by every goroutine of the Runtime.
type config struct {
	coordinators []string // base URLs as given; checked into client
	client       *coordclient.Client
	stream       string
	group        string
	rdb          redis.UniversalClient
	concurrency  int
	baseID       string
	maxWorkers   int
	block        time.Duration
	batch        int
	claimMinIdle time.Duration
	memberName   string
	httpClient   *http.Client
	ownHTTP      bool // httpClient was made by New: Run closes its idle connections
	// authorization is the Authorization header sent to the coordinator;
	// empty sends none.
	authorization string
	authSet       int
	log           *slog.Logger
	onAssigned    func(ctx context.Context, shards []int)
	onRevoked     func(ctx context.Context, shards []int)
	hooks         Hooks
	memberLease   time.Duration
	leaveTimeout  time.Duration
	// retryAttempts, retryDelay, retryMaxDelay: WithHandlerRetry.
	retryAttempts             int
	retryDelay, retryMaxDelay time.Duration
	// handlerDeadline: WithHandlerDeadline(true).
	handlerDeadline bool
	// dlqMax, dlqStream: WithDeadLetter (dlqSet: it was given).
	dlqMax    int
	dlqStream string
	dlqSet    bool
	// syncAcks: WithSyncAcks(true); ackMax, ackDelay: WithAckBatch.
	syncAcks bool
	ackMax   int
	ackDelay time.Duration
	// redisFailureLimit: reads failed in a row on one shard before the
	// member gives its shards back.
	redisFailureLimit int
	// baseIDFrom names where the default base id came from, for the log.
	baseIDFrom string
}

// WithCoordinator sets the base URL of the coordinator, e.g.
// "http://rscoord:8080" or "rscoord:8080". The runtime appends the API
// path (/coord/v1); a URL that already ends with it is accepted. Several
// URLs (several arguments, or one comma-separated list) are replicas of a
// coordinator cluster: a heartbeat that cannot connect to one tries the
// next. Required; http or https.
func WithCoordinator(baseURLs ...string) Opt {
	return optFunc(func(c *config) { c.coordinators = baseURLs })
}

// WithStream sets the stream prefix: shard i is the Redis stream key
// "{prefix}:{i}". Required; 1–200 of [A-Za-z0-9._:-] (docs/protocol.md §1).
func WithStream(prefix string) Opt {
	return optFunc(func(c *config) { c.stream = prefix })
}

// WithGroup sets the consumer group, which is both the coordinator's group
// and the Redis consumer group read on every shard. Default: the stream
// prefix (the group the coordinator registers with every stream); 1–200 of
// [A-Za-z0-9._:@-]. The Redis consumer group must exist on every shard
// (the coordinator creates it when it has Redis configured).
func WithGroup(group string) Opt {
	return optFunc(func(c *config) { c.group = group })
}

// WithRedis sets the Redis client of the data plane: a *redis.Client, or a
// *redis.ClusterClient for Redis Cluster. Required. redisconn.Open builds
// one from a host:port list or a redis:// / rediss:// URL, with a CA file
// for TLS and a NAT map for a Redis Cluster behind NAT. The runtime never
// closes it. Each owned shard holds one connection for as long as it reads
// the shard (its read connection, of its node's pool in a cluster; see
// WithBlock) and borrows one more for a moment for a lag query, and
// stopping it borrows one for CLIENT UNBLOCK; each worker holds one while it
// ACKs: size the pool (PoolSize, per node in a cluster) for the shards a
// process may own plus its workers, with room to spare.
//
// Blocking reads are interrupted only with a *redis.Client or a client
// with MasterForKey (*redis.ClusterClient), which can give the read
// connection; with any other (a *redis.Ring, a wrapper) they go over the
// pool and end at their BLOCK, so stopping a shard waits up to WithBlock.
// In a cluster the read connection is the node client's: hooks added to
// the ClusterClient itself (AddHook) do not see its reads, hooks added to
// every node (OnNewNode) do.
func WithRedis(client redis.UniversalClient) Opt {
	return optFunc(func(c *config) { c.rdb = client })
}

// WithConcurrency sets the listener concurrency: the number of logical
// members this Runtime runs, "{base}-m0" … "{base}-m{n-1}", each with its
// own heartbeat loop, shards and workers (docs/protocol.md §8). Default 1;
// 1..MaxConcurrency.
func WithConcurrency(n int) Opt {
	return optFunc(func(c *config) { c.concurrency = n })
}

// WithBaseID sets the base of the member ids. Default: the POD_NAME
// environment variable, else this host's name and the process id (unique
// per process, so two processes on one host never share an id; it is
// logged at start). "{base}-m{i}" must be a valid member id (1–200 of
// [A-Za-z0-9._:@-]) and must be unique in the group: two processes with one
// id share a Redis consumer name and the coordinator keeps only one of
// them.
func WithBaseID(id string) Opt {
	return optFunc(func(c *config) { c.baseID = id })
}

// WithMaxWorkers sets runtimeMaxConcurrency: how many handlers one logical
// member runs at once over all its shards. Workers rotate over the owned
// shards, one record per turn, so no shard starves; records of one shard
// are handled one at a time, in order. It never creates members (see
// WithConcurrency). Default 1; 1..MaxWorkers.
func WithMaxWorkers(n int) Opt {
	return optFunc(func(c *config) { c.maxWorkers = n })
}

// WithBlock sets how long one XREADGROUP for new entries blocks (BLOCK).
// A read in progress when the shard's ownership ends (revoked, left,
// fenced, lease lapsed) is cut short with CLIENT UNBLOCK, so stopping a
// shard takes a few round trips, not the block; only with a client that
// cannot give a read connection (see WithRedis) does it wait up to the
// block, which then bounds how long a revocation waits before it can be
// reported. Default 1s; at least 1ms and less than the member lease.
func WithBlock(d time.Duration) Opt {
	return optFunc(func(c *config) { c.block = d })
}

// WithBatch sets how many entries one read fetches (COUNT); they are
// handled before the shard reads again. Default 64; 1..MaxBatch. Each
// read is a round trip (the previous batch's XACK rides on it), so a
// smaller batch costs more per record; a larger one costs little at a
// revocation, which hands the records not started yet back.
func WithBatch(n int) Opt {
	return optFunc(func(c *config) { c.batch = n })
}

// WithClaimMinIdle sets the XAUTOCLAIM min idle time: pending entries of
// the group idle for longer are claimed when a shard starts and again
// every min-idle interval while it is owned; this recovers records left
// pending by a previous owner and redelivers records this member Nacked.
// Default 30s; at least 1ms.
func WithClaimMinIdle(d time.Duration) Opt {
	return optFunc(func(c *config) { c.claimMinIdle = d })
}

// WithMemberName sets the human name sent in heartbeats (memberName) and
// shown by monitoring. Default "rscoord-go"; 1–200 characters.
func WithMemberName(name string) Opt {
	return optFunc(func(c *config) { c.memberName = name })
}

// WithHTTPClient sets the HTTP client used for heartbeats. Its Timeout, if
// any, applies on top of the runtime's own per-request bound (a third of
// the member lease, at least 500ms). Default: a client with its own
// transport, whose idle connections Run closes before it returns.
func WithHTTPClient(client *http.Client) Opt {
	return optFunc(func(c *config) { c.httpClient = client })
}

// WithLogger sets the logger of the runtime, protoactor's included.
// go-redis's own lines are not among them: go-redis has one logger per
// process, which the program sets (see [RedisLogger]). Default
// slog.Default().
func WithLogger(log *slog.Logger) Opt {
	return optFunc(func(c *config) { c.log = log })
}

// WithOnAssigned sets a hook called with the shards a member is about to
// start reading, after the coordinator granted them and before the first
// read. Use it to start readers of your own. [MemberID] on its ctx names
// the member.
//
// Hooks (WithOnAssigned and WithOnRevoked) are never called concurrently,
// not even for different logical members of one Runtime. They run on the
// member's heartbeat loop: a slow hook delays heartbeats and can cost the
// member its lease. Calling Run or waiting for Run inside a hook deadlocks.
func WithOnAssigned(fn func(ctx context.Context, shards []int)) Opt {
	return optFunc(func(c *config) { c.onAssigned = fn })
}

// WithOnRevoked sets a hook called with shards a member no longer reads,
// once per set: after a revocation (or a leave) once reads stopped and
// the member's in-flight handlers for all of them returned (or were
// abandoned at the drain deadline), and before the coordinator is told
// they are revoked; on fencing, lease expiry and failure at once, after
// reads and ACKs stopped. When it returns, your own readers of those
// shards must have stopped. See WithOnAssigned for how hooks are called;
// [Hooks].OnRevoked also tells the reason.
func WithOnRevoked(fn func(ctx context.Context, shards []int)) Opt {
	return optFunc(func(c *config) { c.onRevoked = fn })
}

// WithMemberLease sets the member lease TTL: without a successful
// heartbeat for this long, measured from when that heartbeat was sent,
// every member of the Runtime stops reads and ACKs on every shard (fail
// closed) until a later OK. When the coordinator's answers carry its own
// lease (memberLeaseMs), the shorter of the two is used and a warning is
// logged once if they differ. Default 15s (protocol.DefaultMemberLease);
// at least 100ms.
func WithMemberLease(d time.Duration) Opt {
	return optFunc(func(c *config) { c.memberLease = d })
}

// WithLeaveTimeout bounds the whole of Run after its context is cancelled:
// draining the running handlers, sending the queued acks, the leave
// heartbeat and stopping the workers (see [Runtime.Run]). The drain ends
// when a quarter of it (at most 5s) is left; handlers still running then
// are abandoned (their contexts cancelled, their ACKs fail) and the member
// leaves anyway, once its reads in progress have returned (they are
// interrupted; see WithBlock). An abandoned handler that ignores its
// context may still be running when Run returns. Default 25s, which fits
// Kubernetes' default termination grace period of 30s; at least 100ms.
func WithLeaveTimeout(d time.Duration) Opt {
	return optFunc(func(c *config) { c.leaveTimeout = d })
}

// WithRedisFailureLimit sets how many reads of one shard may fail in a
// row (Redis down, frozen or refusing) before the member gives every shard
// back: it leaves the group gracefully, so that healthy members take the
// shards, and rejoins once Redis answers a PING again (probed with
// backoff). A member also joins only once Redis answers. Default 3;
// 1..MaxRedisFailureLimit.
func WithRedisFailureLimit(n int) Opt {
	return optFunc(func(c *config) { c.redisFailureLimit = n })
}

// WithHandlerRetry retries a failed handler call in place: when the
// handler returns an error (or panics) without settling the record, it is
// handed to the handler again after delay (doubled per attempt, at most
// maxDelay, plus jitter), on the same worker, while the shard's later
// records wait: a transient failure does not reorder a key. After
// attempts calls the record is left pending (a Nack) and the shard moves
// on. Retries stop at once when the member may no longer acknowledge the
// record (fenced, lease lapsed, drain deadline, Run ending); a retry that
// outlasts a revocation delays its hand-off up to the drain deadline, so
// keep attempts × maxDelay well under the rebalance timeout. Default 1
// attempt (no retry), delay 100ms, maxDelay 5s; attempts
// 1..MaxHandlerAttempts, delay at least 1ms and at most maxDelay.
func WithHandlerRetry(attempts int, delay, maxDelay time.Duration) Opt {
	return optFunc(func(c *config) { c.retryAttempts, c.retryDelay, c.retryMaxDelay = attempts, delay, maxDelay })
}

// WithHandlerDeadline says whether a handler's ctx carries the member's
// lease end as its deadline (default off). On, the deadline is the lease
// end as known when the records were handed to the handler (each attempt
// of WithHandlerRetry gets the one known then): up to it the member is
// sure it owns the shard, and a handler can plan by ctx.Deadline(). A
// context's deadline cannot move, so a later heartbeat that renews the
// lease does not extend it: ctx ends at it even though the member still
// owns the shard (while heartbeats succeed, about the member lease less up
// to two heartbeat intervals after the hand-over), and a handler that
// always needs longer never finishes. Its Ack still succeeds after the
// deadline while the lease holds (give it a fresh context).
//
// Off: ctx has no deadline and ends only when the member must stop at once
// (lease lapsed, fenced, drain deadline of a revoked shard, Run ending), so
// a handler may run across lease renewals, up to the drain deadline once
// its shard is revoked.
func WithHandlerDeadline(on bool) Opt {
	return optFunc(func(c *config) { c.handlerDeadline = on })
}

// WithAckBatch bounds the coalescing of acks (see [Message.Ack]): a
// shard's accepted acks are sent once maxCount of them are queued, once the
// shard's read batch is done, or maxDelay after the first of them was
// accepted, whichever comes first. Default 256 and 5ms; maxCount
// 1..MaxBatch, maxDelay 100µs..1s.
func WithAckBatch(maxCount int, maxDelay time.Duration) Opt {
	return optFunc(func(c *config) { c.ackMax, c.ackDelay = maxCount, maxDelay })
}

// WithSyncAcks(true) makes every Ack and AckAll send its own XACK and
// return once Redis answered it (see [Message.Ack]): slower (one round
// trip per call, on the handler's worker), but an Ack that returned nil
// is in Redis. Default false: acks are coalesced (WithAckBatch).
func WithSyncAcks(on bool) Opt {
	return optFunc(func(c *config) { c.syncAcks = on })
}

// newConfig applies opts, fills defaults and validates the result.
func newConfig(opts []Opt) (config, error) {
	c := config{
		concurrency:  1,
		maxWorkers:   1,
		block:        time.Second,
		batch:        64,
		claimMinIdle: 30 * time.Second,
		memberName:   "rscoord-go",
		memberLease:  protocol.DefaultMemberLease,
		leaveTimeout: 25 * time.Second,
		ackMax:       256,
		ackDelay:     5 * time.Millisecond,

		redisFailureLimit: 3,
		retryAttempts:     1,
		retryDelay:        100 * time.Millisecond,
		retryMaxDelay:     5 * time.Second,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.group == "" {
		c.group = c.stream
	}
	if c.baseID == "" {
		c.baseID, c.baseIDFrom = defaultBaseID()
	} else {
		c.baseIDFrom = "WithBaseID"
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.httpClient == nil {
		c.httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		c.ownHTTP = true
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.authSet > 1 {
		add("WithBasicAuth and WithBearerToken exclude each other")
	}

	if client, err := coordclient.New(c.coordinators, coordclient.Options{
		HTTPClient: c.httpClient, Authorization: c.authorization, UserAgent: "rscoord-member",
		MemberLease: max(c.memberLease, 0),
	}); err != nil {
		add("WithCoordinator: %w", err)
	} else {
		c.client = client
	}
	if err := protocol.ValidateStreamPrefix(c.stream); err != nil {
		add("WithStream: %w", err)
	}
	if err := protocol.ValidateConsumerGroup(c.group); err != nil {
		add("WithGroup: %w", err)
	}
	if c.rdb == nil {
		add("WithRedis: a Redis client is required")
	}
	if c.concurrency < 1 || c.concurrency > MaxConcurrency {
		add("WithConcurrency: %d is outside 1..%d", c.concurrency, MaxConcurrency)
	} else if err := protocol.ValidateMemberID(memberID(c.baseID, c.concurrency-1)); err != nil {
		add("WithBaseID (from %s): member ids %q…: %w", c.baseIDFrom, memberID(c.baseID, 0), err)
	}
	if c.maxWorkers < 1 || c.maxWorkers > MaxWorkers {
		add("WithMaxWorkers: %d is outside 1..%d", c.maxWorkers, MaxWorkers)
	}
	if c.block < time.Millisecond {
		add("WithBlock: %v is shorter than 1ms (BLOCK 0 would block for ever)", c.block)
	} else if c.block >= c.memberLease {
		add("WithBlock: %v must be shorter than the member lease %v", c.block, c.memberLease)
	}
	if c.batch < 1 || c.batch > MaxBatch {
		add("WithBatch: %d is outside 1..%d", c.batch, MaxBatch)
	}
	if c.claimMinIdle < time.Millisecond {
		add("WithClaimMinIdle: %v is shorter than 1ms", c.claimMinIdle)
	}
	if c.memberName == "" || len(c.memberName) > protocol.MaxNameLength {
		add("WithMemberName: %q must have 1–%d characters", c.memberName, protocol.MaxNameLength)
	}
	if c.memberLease < 100*time.Millisecond {
		add("WithMemberLease: %v is shorter than 100ms", c.memberLease)
	}
	if c.redisFailureLimit < 1 || c.redisFailureLimit > MaxRedisFailureLimit {
		add("WithRedisFailureLimit: %d is outside 1..%d", c.redisFailureLimit, MaxRedisFailureLimit)
	}
	if c.retryAttempts < 1 || c.retryAttempts > MaxHandlerAttempts {
		add("WithHandlerRetry: %d attempts is outside 1..%d", c.retryAttempts, MaxHandlerAttempts)
	}
	if c.retryDelay < time.Millisecond || c.retryMaxDelay < c.retryDelay {
		add("WithHandlerRetry: the delay %v must be at least 1ms and at most the max delay %v", c.retryDelay, c.retryMaxDelay)
	}
	if c.ackMax < 1 || c.ackMax > MaxBatch {
		add("WithAckBatch: a count of %d is outside 1..%d", c.ackMax, MaxBatch)
	}
	if c.ackDelay < 100*time.Microsecond || c.ackDelay > time.Second {
		add("WithAckBatch: a delay of %v is outside 100µs..1s", c.ackDelay)
	}
	if err := checkDeadLetter(&c); err != nil {
		errs = append(errs, err)
	}
	if c.leaveTimeout < 100*time.Millisecond {
		add("WithLeaveTimeout: %v is shorter than 100ms", c.leaveTimeout)
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("member: invalid options: %w", errors.Join(errs...))
	}
	return c, nil
}

// WithBasicAuth sends HTTP Basic credentials to the coordinator on every
// call (docs/protocol.md §4: producer routing needs READ or MEMBER, heartbeats
// MEMBER when the server runs with member auth). Default: no credentials.
// Conflicts with WithBearerToken.
func WithBasicAuth(username, password string) Opt {
	return optFunc(func(c *config) {
		c.authorization = protocol.BasicAuthorization(username, password)
		c.authSet++
	})
}

// WithBearerToken sends an access token from POST /auth/login to the
// coordinator on every call. Tokens expire (7 days by default): a
// long-running process should prefer WithBasicAuth. Conflicts with
// WithBasicAuth.
func WithBearerToken(token string) Opt {
	return optFunc(func(c *config) {
		c.authorization = protocol.BearerAuthorization(token)
		c.authSet++
	})
}
