// Command consumer-pod is a runnable sample member process: it runs a
// member.Runtime for one stream and consumer group, handles each record by
// sleeping --handler-delay, and writes what it did to two JSON-lines logs
// that end-to-end tests read:
//
//   - --events-log: one line per handled record, written before its ACK,
//     as an application commits its work before acknowledging: a pod killed
//     in between has its record redelivered and logged again (at least
//     once), never acknowledged and unlogged:
//     {"memberId","instanceId","shard","ownerEpoch","streamKey","recordId","eventId",
//     "startedAtUnixNano" (the handler started),"handledAt","handledAtUnixNano"}.
//     eventId is the record's "eventId" field ("" if it has none).
//   - --ownership-log: one line each time a member starts or stops reading
//     a shard: {"memberId","instanceId","shard","event":"start"|"stop","atUnixNano"}.
//     "start" is written just before the first read of the shard, "stop"
//     once its reads stopped and its handlers returned (at once on fencing
//     or lease expiry), so a member's [start, stop] encloses all its work
//     on the shard.
//
// With --health-listen the pod serves GET /readyz (200 while
// member.Runtime.Ready: every member joined, its lease valid and its Redis
// working; 503 before the join, while Redis is down, while rejoining or
// leaving), GET /livez and GET /metrics (memberprom). --probe URL runs
// nothing but a GET of URL, exiting 0 on 200: the compose healthcheck of
// an image without curl.
//
// Timestamps are wall-clock nanoseconds (time.Now().UnixNano()), not a
// monotonic clock: the point is to compare them across processes on one
// machine, which only the wall clock allows. They are only as good as that
// clock: a clock step during a test run breaks comparisons.
//
// Every log line is written with one write(2) of the whole line to a file
// opened O_APPEND and nothing is buffered, so lines survive a SIGKILL and
// lines of concurrent writers never interleave. SIGTERM or SIGINT make the
// members leave gracefully (drain, then memberEpoch -1); the exit code is
// then 0. A failed runtime exits 1, a command line that does not parse 2.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/redisconn"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// CLI is the command line of consumer-pod.
type CLI struct {
	Coordinator   string        `default:"http://127.0.0.1:8080" env:"RSCOORD_COORDINATOR" help:"Base URL of the coordinator."`
	Redis         string        `default:"127.0.0.1:6379" env:"RSCOORD_REDIS" help:"Redis holding the shard streams: host:port (several, comma-separated: a Redis Cluster), or a redis:// or rediss:// (TLS) URL with user and password; a host:port's password comes from RSCOORD_REDIS_PASSWORD."`
	RedisUsername string        `env:"RSCOORD_REDIS_USERNAME" help:"ACL user for a host:port --redis (a URL carries its own); its password comes from RSCOORD_REDIS_PASSWORD."`
	RedisCAFile   string        `name:"redis-ca-file" placeholder:"FILE" env:"RSCOORD_REDIS_CA_FILE" help:"PEM file of the CAs that sign the Redis server certificate of a rediss:// --redis (default: the system's)."`
	RedisNATMap   string        `name:"redis-nat-map" placeholder:"ANNOUNCED=REACHABLE,…" env:"RSCOORD_REDIS_NAT_MAP" help:"Redis Cluster nodes behind NAT: announced-host:port=connect-host:port,… maps each address the cluster announces to one this process reaches (makes --redis a cluster even with one seed)."`
	Stream        string        `env:"RSCOORD_STREAM" help:"Stream prefix: shards are {stream}:0, {stream}:1, … (required)."`
	Group         string        `env:"RSCOORD_GROUP" help:"Consumer group (default: the stream prefix)."`
	Concurrency   int           `default:"1" help:"Logical members in this process ({base}-m0 …)."`
	Workers       int           `default:"1" help:"Handlers running at once per member (runtimeMaxConcurrency)."`
	HandlerDelay  time.Duration `default:"0s" help:"Time the handler sleeps per record."`
	MemberLease   time.Duration `default:"15s" help:"Member lease; must equal the coordinator's --member-lease."`
	EventsLog     string        `help:"File that gets one JSON line per handled record."`
	OwnershipLog  string        `help:"File that gets one JSON line each time a member starts or stops reading a shard."`
	AckMode       string        `default:"ack" enum:"ack,ackdel" help:"How records are settled: ack (XACK) or ackdel (ACK and delete)."`
	BaseID        string        `help:"Base of the member ids (default: POD_NAME, else the host name and process id)."`
	Block         time.Duration `default:"1s" help:"XREADGROUP BLOCK time."`
	ClaimMinIdle  time.Duration `default:"30s" help:"XAUTOCLAIM min idle time."`
	LeaveTimeout  time.Duration `default:"25s" help:"Bound on all of the shutdown after SIGTERM (drain, leave, workers); 25s fits a 30s grace period."`
	HealthListen  string        `name:"health-listen" placeholder:"ADDR" env:"RSCOORD_HEALTH_LISTEN" help:"host:port to serve GET /readyz (200 while every member is joined with a valid lease and a working Redis, else 503; the body is the members' status), GET /livez and GET /metrics on; empty: no listener."`
	Probe         string        `placeholder:"URL" help:"Run nothing: GET URL (a running pod's /readyz) and exit 0 when it answers 200, 1 otherwise. A healthcheck for images without an HTTP client (compose.yaml)."`
	LogLevel      slog.Level    `default:"info" env:"RSCOORD_LOG_LEVEL" help:"Lowest log level written to stderr: debug, info, warn or error."`
	LogFormat     string        `default:"text" enum:"text,json" env:"RSCOORD_LOG_FORMAT" help:"Log format on stderr: text or json."`
	User          string        `env:"RSCOORD_USER" help:"User for HTTP Basic credentials to the coordinator (a MEMBER user: needed unless it runs with --no-member-auth)."`
	Password      string        `env:"RSCOORD_PASSWORD" help:"Password of --user."`
	Token         string        `env:"RSCOORD_TOKEN" help:"Bearer token from POST /coord/v1/auth/login, instead of --user."`
	// HoldOnSignal is a fault hook of the chaos suite (e2e): a pod frozen
	// in the middle of a handler needs a handler that is surely running
	// when the SIGSTOP comes.
	HoldOnSignal time.Duration `hidden:"" help:"Testing: on SIGUSR1 the next handler logs \"chaos: handler holding\" and waits for its context to be cancelled (at most this long) before going on; then it logs \"chaos: handler hold ended\"."`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// exitRequest carries kong's exit code (after --help) out of the parser.
type exitRequest struct{ code int }

// run parses args and runs the pod until ctx is done; it returns the exit
// code. Logs and errors go to stderr.
func run(ctx context.Context, args []string, stderr io.Writer) (code int) {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("consumer-pod"),
		kong.Description("Sample rscoord member process: reads its shards and logs every record and ownership change."),
		kong.Writers(stderr, stderr),
		kong.Exit(func(code int) { panic(exitRequest{code}) }),
	)
	if err != nil {
		fmt.Fprintf(stderr, "consumer-pod: build command line: %v\n", err)
		return exitError
	}
	defer func() {
		if r := recover(); r != nil {
			req, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			code = req.code
		}
	}()
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintf(stderr, "consumer-pod: %v (see consumer-pod --help)\n", err)
		return exitUsage
	}
	if cli.Probe != "" {
		if err := probe(ctx, cli.Probe); err != nil {
			fmt.Fprintf(stderr, "consumer-pod: %v\n", err)
			return exitError
		}
		return exitOK
	}
	if cli.Stream == "" {
		fmt.Fprintln(stderr, "consumer-pod: missing flags: --stream=STRING (see consumer-pod --help)")
		return exitUsage
	}
	logOpts := &slog.HandlerOptions{Level: cli.LogLevel}
	var handler slog.Handler = slog.NewTextHandler(stderr, logOpts)
	if cli.LogFormat == "json" {
		handler = slog.NewJSONHandler(stderr, logOpts)
	}
	log := slog.New(handler)
	// go-redis's own lines (dial failures, pool trouble) in the pod's log
	// format: its logger is one per process, so the program sets it.
	redis.SetLogger(redisconn.NewLogger(log))
	if err := cli.Run(ctx, log); err != nil {
		fmt.Fprintf(stderr, "consumer-pod: %v\n", err)
		return exitError
	}
	return exitOK
}

// Run runs the member runtime until ctx is done. In order, on the way out:
// the runtime leaves (Run returns; /readyz answers 503 while it drains),
// then the health listener stops, then the Redis client closes, then the
// logs are synced and closed.
func (c *CLI) Run(ctx context.Context, log *slog.Logger) (err error) {
	events, err := openLines(c.EventsLog)
	if err != nil {
		return fmt.Errorf("--events-log: %w", err)
	}
	defer func() { err = errors.Join(err, events.Close()) }()
	owners, err := openLines(c.OwnershipLog)
	if err != nil {
		return fmt.Errorf("--ownership-log: %w", err)
	}
	defer func() { err = errors.Join(err, owners.Close()) }()

	rdb, err := openRedis(c.Redis, c.RedisUsername, c.RedisCAFile, c.RedisNATMap)
	if err != nil {
		return err
	}
	defer rdb.Close()

	settle := (*member.Message).Ack
	if c.AckMode == "ackdel" {
		settle = (*member.Message).AckDel
	}
	var instanceID string // set once the runtime exists, before Run
	hold, stopHold := c.holdOnSignal(log)
	defer stopHold()
	handler := func(ctx context.Context, m *member.Message) error {
		started := time.Now()
		if err := hold(ctx, m); err != nil {
			return err
		}
		if c.HandlerDelay > 0 {
			t := time.NewTimer(c.HandlerDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("handler delay: %w", ctx.Err())
			}
		}
		now := time.Now()
		eventID, _ := m.Fields["eventId"].(string)
		if err := events.Write(eventLine{
			MemberID: m.MemberID, InstanceID: instanceID, Shard: m.Shard, OwnerEpoch: m.OwnerEpoch,
			StreamKey: m.StreamKey, RecordID: m.ID, EventID: eventID,
			HandledAt: now.UTC().Format(time.RFC3339Nano), HandledAtUnixNano: now.UnixNano(), StartedAtUnixNano: started.UnixNano(),
		}); err != nil {
			// Not recorded, so not handled: leave it pending for redelivery.
			return fmt.Errorf("write events log: %w", err)
		}
		return settle(m, ctx)
	}
	ownership := func(event string) func(ctx context.Context, shards []int) {
		return func(ctx context.Context, shards []int) {
			ts := time.Now().UnixNano()
			for _, s := range shards {
				if err := owners.Write(ownershipLine{MemberID: member.MemberID(ctx), InstanceID: instanceID, Shard: s, Event: event, AtUnixNano: ts}); err != nil {
					log.Error("write ownership log", slog.Any("error", err))
				}
			}
		}
	}
	opts := []member.Opt{
		member.WithCoordinator(c.Coordinator), member.WithStream(c.Stream), member.WithRedis(rdb),
		member.WithConcurrency(c.Concurrency), member.WithMaxWorkers(c.Workers), member.WithMemberLease(c.MemberLease),
		member.WithBlock(c.Block), member.WithClaimMinIdle(c.ClaimMinIdle), member.WithLeaveTimeout(c.LeaveTimeout),
		member.WithMemberName("consumer-pod"), member.WithLogger(log),
		member.WithOnAssigned(ownership("start")), member.WithOnRevoked(ownership("stop")),
	}
	if c.Group != "" {
		opts = append(opts, member.WithGroup(c.Group))
	}
	if c.BaseID != "" {
		opts = append(opts, member.WithBaseID(c.BaseID))
	}
	if c.User != "" {
		opts = append(opts, member.WithBasicAuth(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, member.WithBearerToken(c.Token))
	}
	rt, err := member.New(handler, opts...)
	if err != nil {
		return err
	}
	instanceID = rt.InstanceID()
	if c.HealthListen != "" {
		// Up before the runtime runs: not ready until every member joined.
		stopHealth, err := serveHealth(c.HealthListen, rt, log)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopHealth()) }()
	}
	return rt.Run(ctx)
}

// holdOnSignal arms --hold-on-signal: after each SIGUSR1 the next call of
// the returned function blocks until the handler's context is cancelled or
// the hold time passes. It reports the context's error when the hold was
// cut by it (the record is then not handled). stop ends the signal
// watcher and waits for it.
func (c *CLI) holdOnSignal(log *slog.Logger) (hold func(context.Context, *member.Message) error, stop func()) {
	if c.HoldOnSignal <= 0 {
		return func(context.Context, *member.Message) error { return nil }, func() {}
	}
	var armed atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-sig:
				armed.Store(true)
			case <-quit:
				return
			}
		}
	}()
	stop = func() {
		signal.Stop(sig)
		close(quit)
		<-done
	}
	return func(hctx context.Context, m *member.Message) error {
		if !armed.CompareAndSwap(true, false) {
			return nil
		}
		attrs := []any{slog.String("memberId", m.MemberID), slog.Int("shard", m.Shard), slog.String("recordId", m.ID)}
		log.Warn("chaos: handler holding", attrs...)
		t := time.NewTimer(c.HoldOnSignal)
		defer t.Stop()
		select {
		case <-hctx.Done():
			log.Warn("chaos: handler hold ended", append(attrs, slog.Bool("cancelled", true))...)
			return fmt.Errorf("held handler: %w", hctx.Err())
		case <-t.C:
			log.Warn("chaos: handler hold ended", append(attrs, slog.Bool("cancelled", false))...)
			return nil
		}
	}, stop
}

// eventLine is one line of the events log.
type eventLine struct {
	MemberID          string `json:"memberId"`
	InstanceID        string `json:"instanceId"`
	Shard             int    `json:"shard"`
	OwnerEpoch        int64  `json:"ownerEpoch"`
	StartedAtUnixNano int64  `json:"startedAtUnixNano"`
	StreamKey         string `json:"streamKey"`
	RecordID          string `json:"recordId"`
	EventID           string `json:"eventId"`
	HandledAt         string `json:"handledAt"`
	HandledAtUnixNano int64  `json:"handledAtUnixNano"`
}

// ownershipLine is one line of the ownership log.
type ownershipLine struct {
	MemberID   string `json:"memberId"`
	InstanceID string `json:"instanceId"`
	Shard      int    `json:"shard"`
	Event      string `json:"event"`
	AtUnixNano int64  `json:"atUnixNano"`
}

// lines is a JSON-lines file; nil (no file asked for) writes nothing.
type lines struct {
	mu sync.Mutex
	f  *os.File
}

func openLines(path string) (*lines, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &lines{f: f}, nil
}

// Write appends v as one line with a single write.
func (l *lines) Write(v any) error {
	if l == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.f.Write(b)
	return err
}

// Close syncs and closes the file.
func (l *lines) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.f.Sync(), l.f.Close())
}

// openRedis opens --redis with the other Redis flags; the password of a
// host:port comes from RSCOORD_REDIS_PASSWORD.
func openRedis(spec, username, caFile, natMap string) (redis.UniversalClient, error) {
	nat, err := redisconn.ParseNATMap(natMap)
	if err != nil {
		return nil, fmt.Errorf("--redis-nat-map: %w", err)
	}
	rdb, err := redisconn.Open(spec, redisconn.Config{
		Username: username, Password: os.Getenv("RSCOORD_REDIS_PASSWORD"), CAFile: caFile, NATMap: nat,
	})
	if err != nil {
		return nil, fmt.Errorf("--redis: %w", err)
	}
	return rdb, nil
}
