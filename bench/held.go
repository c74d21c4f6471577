package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// HeldConfig describes a held-heartbeat run: Groups streams of Shards
// shards, each with Members members that settle and then hold every steady
// heartbeat for the interval (waitMs), as package member does, on
// keep-alive connections. While they are parked, Churn members a second
// join a group, live a few intervals and leave, so that the group's
// targets change and some parked answers are released early; the run
// times the answers that were not held.
type HeldConfig struct {
	// Server is the coordinator's base URL.
	Server string
	// Member authenticates heartbeats (a MEMBER on the bench's streams);
	// Admin creates the streams and reads the server's memory
	// (/debug/pprof needs ADMIN). The zero values send none.
	Member, Admin coordclient.Credentials `json:"-"`
	// Groups, Members (per group) and Shards (per stream).
	Groups, Members, Shards int
	// Conns is the concurrency of the join; the held phase uses one
	// connection per member, or with H2C one per MembersPerConn members.
	Conns int
	// H2C makes the members speak HTTP/2 over cleartext (the server's
	// --http2), MembersPerConn of them (default 100) sharing one client
	// and so one connection, as the members of one pod share their
	// runtime's client: their held heartbeats are streams of it.
	H2C            bool
	MembersPerConn int
	// Duration is the measured phase with every member held.
	Duration time.Duration
	// Churn is how many members a second join during Duration; each
	// leaves after ChurnLife. Default 1 a second, 3 intervals. Each join
	// and leave releases the parked answers of the members whose shards
	// it moves; the others learn the new epoch when their wait ends.
	Churn     float64
	ChurnLife time.Duration
	// Prefix names the streams: Prefix0, Prefix1, … Default "held".
	Prefix string
	// Memory reads the server's memory; nil skips the memory figures.
	Memory func(context.Context) (ServerMemory, error) `json:"-"`
	// OpenFiles counts the server's open file descriptors (its
	// connections among them); nil skips the connection count.
	OpenFiles func() (int, error) `json:"-"`
	// ServerCPU reads the CPU time the server has used so far (ProcessCPU
	// of its process); nil when the bench did not start it: its CPU is
	// then unknown.
	ServerCPU func() (time.Duration, error) `json:"-"`
	// OnMeasure, when set, runs beside the measured phase (from its
	// start, with a context that ends with it): profiling the server.
	OnMeasure func(ctx context.Context) `json:"-"`
}

// ServerMemory is what the server reports of its memory after a garbage
// collection.
type ServerMemory struct {
	// HeapAlloc is the live heap; StackInuse the goroutine stacks (one per
	// open connection among them); RSS the resident set.
	HeapAlloc  uint64 `json:"heapAlloc"`
	StackInuse uint64 `json:"stackInuse"`
	RSS        uint64 `json:"rss"`
}

// Live is heap and stacks: what the server's state costs, connections
// included.
func (m ServerMemory) Live() uint64 { return m.HeapAlloc + m.StackInuse }

// HeldReport is the outcome of a held-heartbeat run.
type HeldReport struct {
	Config HeldConfig `json:"config"`
	// Members joined in all (Groups × Members); Interval is the steady
	// heartbeatIntervalMs the coordinator answered.
	Members  int           `json:"members"`
	Interval time.Duration `json:"interval"`
	// Settle is how long joining every member took (unheld, Conns at a
	// time).
	Settle time.Duration `json:"settle"`
	// Memory of the server: with the groups alone, with every member
	// joined and idle (no connection open), and with every member's
	// heartbeat parked.
	Groups, Idle, Parked ServerMemory
	// PerMember is (Idle − Groups) / Members, heap and stacks; PerParked
	// is (Parked − Idle) / Members: a parked answer with its connection.
	// RSS figures likewise.
	PerMember, PerParked       float64
	RSSPerMember, RSSPerParked float64
	// HeldAtOnce is how many members had a heartbeat in flight when
	// Parked was read.
	HeldAtOnce int64 `json:"heldAtOnce"`
	// Connections is how many more descriptors the server had open with
	// every member parked than with every member idle: the members'
	// connections (-1 when not counted).
	Connections int `json:"connections"`
	// NotHeld are the answers to requests without waitMs during the
	// measured phase: joins, leaves, reports of revoked shards. Held are
	// the held requests answered during it: Early with news before their
	// wait was over, the rest after it.
	NotHeld      Latencies `json:"notHeld"`
	NotHeldCount int       `json:"notHeldCount"`
	// HeldTook is how long the held requests took: about the interval,
	// unless released early or answered at once.
	HeldTook  Latencies `json:"heldTook"`
	HeldCount int       `json:"heldCount"`
	Early     int       `json:"early"`
	// AtOnce counts held requests answered within 50 ms with nothing new:
	// the coordinator held no more (its cap) or a change raced them.
	AtOnce int `json:"atOnce"`
	// Joined and Left count the churn members.
	Joined, Left int
	// Measured is how long the measured phase lasted: Duration of joins,
	// then the last churn member's life until it left.
	Measured time.Duration `json:"measured"`
	// Errors counts failed requests; NotOK answers other than OK.
	Errors int `json:"errors"`
	NotOK  int `json:"notOK"`
	// NotOKByStatus counts the answers other than OK by status (and
	// error code).
	NotOKByStatus map[string]int `json:"notOKByStatus"`
	// Load is the load average (1 min) at the start and end of the
	// measured phase, when the system tells it.
	LoadStart, LoadEnd float64
	// CPU is the CPU time used during the measured phase.
	CPU HeldCPU `json:"cpu"`
}

// HeldCPU is the CPU time (user and system) processes used during the
// measured phase; a negative figure is unknown.
type HeldCPU struct {
	// Server is the coordinator's (unknown unless the bench started it).
	Server time.Duration `json:"server"`
	// Bench is the bench process's own: the churn, and the held members
	// unless Load is known.
	Bench time.Duration `json:"bench"`
	// Load is the process running the held members, when they run in a
	// process of their own.
	Load time.Duration `json:"load"`
	// Answered is how many heartbeats the server answered during the
	// phase, held and not.
	Answered int `json:"answered"`
}

// ServerCores is the server's CPU time over the phase's length: cores
// busy; negative when unknown.
func (c HeldCPU) ServerCores(measured time.Duration) float64 {
	if c.Server < 0 || measured <= 0 {
		return -1
	}
	return c.Server.Seconds() / measured.Seconds()
}

// ServerPerAnswer is the server's CPU time per heartbeat answered;
// negative when unknown.
func (c HeldCPU) ServerPerAnswer() time.Duration {
	if c.Server < 0 || c.Answered == 0 {
		return -1
	}
	return c.Server / time.Duration(c.Answered)
}

// cpuMeter reads a CPU clock at the start and end of a phase; a nil or
// failing clock makes the figure unknown (-1).
type cpuMeter struct {
	read  func() (time.Duration, error)
	start time.Duration
	ok    bool
}

func startCPU(read func() (time.Duration, error)) cpuMeter {
	m := cpuMeter{read: read}
	if read != nil {
		var err error
		m.start, err = read()
		m.ok = err == nil
	}
	return m
}

// used is the CPU time since startCPU, or -1 when unknown.
func (m cpuMeter) used() time.Duration {
	if !m.ok {
		return -1
	}
	end, err := m.read()
	if err != nil {
		return -1
	}
	return end - m.start
}

// heldMember is a simulated member runtime holding its steady heartbeats.
type heldMember struct {
	// client is the member's wire layer: its runtime's, shared with the
	// other members of its "pod" over HTTP/2.
	client         *coordclient.Client
	prefix, id     string
	epoch, version int64
	owned          []protocol.Shard
	revoking       []protocol.RevokingShard
	seq            int
	lastView       string
	// caughtUp: the heartbeat in flight was sent at once to catch up
	// after a held request answered early because it was behind.
	caughtUp bool
}

// steady is package member's rule for asking a held answer: joined and
// nothing being revoked.
func (m *heldMember) steady() bool { return m.epoch > 0 && len(m.revoking) == 0 }

func (m *heldMember) request(waitMs int64) protocol.HeartbeatRequest {
	m.seq++
	return protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion, RequestID: fmt.Sprintf("%s-%d", m.id, m.seq),
		MemberID: m.id, MemberName: "bench", MemberEpoch: m.epoch, MetadataVersion: m.version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 4, AvailableConcurrency: 4},
		OwnedShards:             m.owned, RevokingShards: m.revoking, ShardProgress: []protocol.ShardProgress{},
		WaitMs: waitMs,
	}
}

// apply takes an answer as package member does, draining a revoked shard
// at once, and says whether it told the member anything new.
func (m *heldMember) apply(resp protocol.HeartbeatResponse) (changed bool) {
	switch resp.Status {
	case protocol.StatusOK, protocol.StatusSyncMetadata, protocol.StatusRevokePending:
		m.epoch, m.version = resp.MemberEpoch, resp.MetadataVersion
		assigned := map[int]bool{}
		for _, s := range resp.Assignment.AssignedShards {
			assigned[s.ShardIndex] = true
		}
		m.revoking = []protocol.RevokingShard{}
		kept := []protocol.Shard{}
		for _, s := range m.owned {
			if assigned[s.ShardIndex] {
				kept = append(kept, s)
			} else {
				m.revoking = append(m.revoking, protocol.RevokingShard{Shard: s, State: protocol.RevokeRevoked})
			}
		}
		m.owned = kept
		if resp.Status == protocol.StatusOK {
			m.owned = resp.Assignment.AssignedShards
		}
	case protocol.StatusUnknownMemberID, protocol.StatusFencedMemberEpoch:
		m.epoch, m.version, m.owned, m.revoking = 0, 0, []protocol.Shard{}, []protocol.RevokingShard{}
	}
	// As package member: news is a change of status or shards, not a new
	// member or group epoch or metadata version alone (a join elsewhere in
	// the group moves those for every member, and a heartbeat at once
	// from each of them would be a storm of unheld requests).
	view := fmt.Sprint(resp.Status, protocol.Indexes(resp.Assignment.AssignedShards), protocol.Indexes(resp.Assignment.PendingShards))
	changed = view != m.lastView
	m.lastView = view
	return changed
}

// heldEarlyMargin is how much sooner than its wait a held answer must come
// to count as released early: the server's timer and the trip back take a
// little of the wait.
const heldEarlyMargin = 250 * time.Millisecond

// heldRun is the shared state of the measured phase.
type heldRun struct {
	cfg    HeldConfig
	client *coordclient.Client
	// churnClient is the churn members' wire layer.
	churnClient *coordclient.Client
	interval    time.Duration
	inFlight    atomic.Int64 // held requests in flight

	mu        sync.Mutex
	measuring bool
	notHeld   []time.Duration
	heldTook  []time.Duration
	rep       *HeldReport
}

func (r *heldRun) record(f func(rep *HeldReport)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.measuring {
		f(r.rep)
	}
}

// beat sends one heartbeat of m, held when m is steady, and times it.
func (r *heldRun) beat(ctx context.Context, m *heldMember) (resp protocol.HeartbeatResponse, held bool, took time.Duration, err error) {
	var wait int64
	if m.steady() {
		wait = r.interval.Milliseconds()
	}
	req := m.request(wait)
	if wait > 0 {
		r.inFlight.Add(1)
		defer r.inFlight.Add(-1)
	}
	start := time.Now()
	resp, err = m.client.Heartbeat(ctx, m.prefix, m.prefix, &req)
	took = time.Since(start)
	if ctx.Err() != nil {
		return resp, wait > 0, took, ctx.Err()
	}
	r.record(func(rep *HeldReport) {
		switch {
		case err != nil:
			rep.Errors++
		case resp.Status != protocol.StatusOK:
			rep.NotOK++
			if rep.NotOKByStatus == nil {
				rep.NotOKByStatus = map[string]int{}
			}
			rep.NotOKByStatus[strings.TrimSuffix(string(resp.Status)+" "+string(resp.ErrorCode), " ")]++
		}
		if wait == 0 {
			r.notHeld = append(r.notHeld, took)
		} else {
			r.heldTook = append(r.heldTook, took)
		}
	})
	return resp, wait > 0, took, err
}

// loop heartbeats m until ctx ends, as package member does: a held
// answer with nothing new is followed by the next held heartbeat at once
// (its wait covered the interval), an answer with news by a heartbeat at
// once, an unheld one with nothing new by the interval, unless the member
// is steady again.
func (r *heldRun) loop(ctx context.Context, m *heldMember) error {
	for ctx.Err() == nil {
		epoch, version := m.epoch, m.version
		resp, held, took, err := r.beat(ctx, m)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// Counted in Errors; the member tries again after a pause, as
			// the member runtime does (a keep-alive connection the server
			// closed as the request left, a refused dial at a full
			// accept queue).
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(errBackoffMin):
			}
			continue
		}
		changed := m.apply(resp)
		if held {
			r.record(func(rep *HeldReport) {
				rep.HeldCount++
				switch {
				case changed && took < r.interval-heldEarlyMargin:
					// Released before its wait was over: a change of its
					// shards or status. News that came with an answer at
					// the end of its wait (a new epoch) is not early.
					rep.Early++
				case took < 50*time.Millisecond:
					rep.AtOnce++
				}
			})
		}
		asked := time.Duration(0)
		if held {
			asked = r.interval
		}
		behind := resp.MemberEpoch != epoch || resp.MetadataVersion != version
		next, catchUp := nextHeldBeat(changed, asked, took, behind, m.steady(), m.caughtUp, r.interval)
		m.caughtUp = catchUp
		if resp.Status == protocol.StatusRetry {
			next = r.interval
		}
		if next > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(next):
			}
		}
	}
	return nil
}

// nextHeldBeat is package member's rule (nextBeat) for when the next
// heartbeat goes: at once after news (status or shards) or after a held
// request's wait ran out; at once, once in a row, after a held request
// answered early only because it was behind (a new epoch or metadata
// version: the coordinator holds only current requests), so the member is
// parked again rather than deaf; at once after an unheld answer when the
// member is steady (its next one is held); else after the rest of its wait
// or the interval.
func nextHeldBeat(news bool, asked, took time.Duration, behind, steady, caughtUp bool, interval time.Duration) (next time.Duration, catchUp bool) {
	switch {
	case news:
		return 0, false
	case asked > 0:
		left := asked - took
		switch {
		case left <= 0:
			return 0, false
		case behind && steady && !caughtUp:
			return 0, true
		}
		return min(left, interval), false
	case steady:
		return 0, false
	}
	return interval, false
}

// RunHeld creates the streams, joins every member, parks them and
// measures the server's memory and the answers that were not held.
func RunHeld(ctx context.Context, cfg HeldConfig) (HeldReport, error) {
	if cfg.Groups <= 0 || cfg.Members <= 0 || cfg.Shards <= 0 || cfg.Duration <= 0 {
		return HeldReport{}, fmt.Errorf("held: groups, members, shards and duration must be positive: %+v", cfg)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "held"
	}
	if cfg.Churn <= 0 {
		cfg.Churn = 1
	}
	cfg.Conns = max(cfg.Conns, 1)
	rep := HeldReport{Config: cfg, Members: cfg.Groups * cfg.Members}
	admin, err := newClient(cfg.Server, cfg.Admin, 4)
	if err != nil {
		return rep, err
	}
	defer admin.CloseIdleConnections()
	auth, err := cfg.Member.Authorization()
	if err != nil {
		return rep, err
	}
	// One keep-alive connection per member, as each member runtime keeps
	// its own, and some for the churn.
	conns := rep.Members + int(cfg.Churn*10) + cfg.Conns
	client, err := coordclient.New([]string{cfg.Server}, coordclient.Options{
		Authorization: auth, UserAgent: "rscoord-bench",
		HTTPClient: &http.Client{Transport: &http.Transport{
			MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
		}},
	})
	if err != nil {
		return rep, err
	}
	defer client.CloseIdleConnections()
	// Over HTTP/2, MembersPerConn members share a client (and the churn
	// members one more): a connection each.
	memberClient := func(int) *coordclient.Client { return client }
	churnClient := client
	var h2Clients []*coordclient.Client
	if cfg.H2C {
		if cfg.MembersPerConn <= 0 {
			cfg.MembersPerConn = 100
			rep.Config.MembersPerConn = 100
		}
		for range (rep.Members+cfg.MembersPerConn-1)/cfg.MembersPerConn + 1 {
			c, err := coordclient.New([]string{cfg.Server}, coordclient.Options{Authorization: auth, UserAgent: "rscoord-bench", H2C: true})
			if err != nil {
				return rep, err
			}
			defer c.CloseIdleConnections()
			h2Clients = append(h2Clients, c)
		}
		churnClient = h2Clients[len(h2Clients)-1]
		memberClient = func(i int) *coordclient.Client { return h2Clients[i/cfg.MembersPerConn] }
	}
	prefix := func(g int) string { return cfg.Prefix + strconv.Itoa(g) }
	for g := range cfg.Groups {
		if err := CreateStream(ctx, admin, prefix(g), cfg.Shards); err != nil {
			return rep, err
		}
	}
	memory := func(into *ServerMemory) error {
		if cfg.Memory == nil {
			return nil
		}
		m, err := cfg.Memory(ctx)
		*into = m
		return err
	}
	if err := memory(&rep.Groups); err != nil {
		return rep, err
	}

	// Join every member, unheld, Conns at a time, until a sweep is quiet.
	members := make([]*heldMember, 0, rep.Members)
	for g := range cfg.Groups {
		for i := range cfg.Members {
			members = append(members, &heldMember{client: memberClient(len(members)), prefix: prefix(g), id: fmt.Sprintf("m%d", i),
				owned: []protocol.Shard{}, revoking: []protocol.RevokingShard{}})
		}
	}
	run := &heldRun{cfg: cfg, client: client, churnClient: churnClient, rep: &rep}
	t0 := time.Now()
	if err := settleHeld(ctx, run, members); err != nil {
		return rep, err
	}
	rep.Settle = time.Since(t0)
	run.interval = rep.Interval
	client.CloseIdleConnections()
	for _, c := range h2Clients {
		c.CloseIdleConnections()
	}
	if err := memory(&rep.Idle); err != nil {
		return rep, err
	}
	filesIdle, err := steadyOpenFiles(ctx, cfg)
	if err != nil {
		return rep, err
	}
	// Each HTTP/2 client opens its connection alone, before its members
	// race to use it (calls racing the first dial may dial for
	// themselves).
	for i, c := range h2Clients {
		if _, err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil); err != nil {
			return rep, fmt.Errorf("held: connect HTTP/2 client %d: %w", i, err)
		}
	}

	// Park them all: each member starts its loop at its own phase of one
	// interval, as members that joined at various times do.
	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var loopErr error
	fail := func(err error) {
		errMu.Lock()
		loopErr = errors.Join(loopErr, err)
		errMu.Unlock()
		stopLoops()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, m := range members {
		phase := time.Duration(rng.Int64N(int64(run.interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-loopCtx.Done():
				return
			case <-time.After(phase):
			}
			if err := run.loop(loopCtx, m); err != nil {
				fail(err)
			}
		}()
	}
	stop := func() error {
		stopLoops()
		wg.Wait()
		errMu.Lock()
		defer errMu.Unlock()
		return loopErr
	}
	// Every member parked: all in flight, for a quarter of an interval.
	parkedBy := time.Now().Add(3*run.interval + 30*time.Second)
	var stableSince time.Time
	for {
		if loopCtx.Err() != nil {
			return rep, errors.Join(stop(), ctx.Err())
		}
		if run.inFlight.Load() >= int64(rep.Members) {
			if stableSince.IsZero() {
				stableSince = time.Now()
			} else if time.Since(stableSince) >= run.interval/4 {
				break
			}
		} else {
			stableSince = time.Time{}
		}
		if time.Now().After(parkedBy) {
			return rep, errors.Join(stop(), fmt.Errorf("held: only %d of %d members had a held heartbeat in flight after %v (is the server's --max-held-heartbeats or --http-max-connections lower?)",
				run.inFlight.Load(), rep.Members, 3*run.interval+30*time.Second))
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep.HeldAtOnce = run.inFlight.Load()
	if err := memory(&rep.Parked); err != nil {
		return rep, errors.Join(stop(), err)
	}
	filesParked, err := openFiles(cfg)
	if err != nil {
		return rep, errors.Join(stop(), err)
	}
	rep.Connections = -1
	if filesIdle >= 0 && filesParked >= 0 {
		rep.Connections = filesParked - filesIdle
	}

	// The measured phase: churn members join and leave while the rest
	// stay parked.
	rep.LoadStart = loadAverage()
	run.mu.Lock()
	run.measuring = true
	run.mu.Unlock()
	serverCPU, benchCPU := startCPU(cfg.ServerCPU), startCPU(selfCPU)
	measureStart := time.Now()
	measureCtx, endMeasure := context.WithCancel(loopCtx)
	var onMeasure sync.WaitGroup
	if cfg.OnMeasure != nil {
		onMeasure.Go(func() { cfg.OnMeasure(measureCtx) })
	}
	churnErr := churn(loopCtx, run, cfg, prefix, &wg, fail)
	endMeasure()
	onMeasure.Wait()
	run.mu.Lock()
	run.measuring = false
	run.mu.Unlock()
	rep.Measured = time.Since(measureStart)
	rep.CPU = HeldCPU{Server: serverCPU.used(), Bench: benchCPU.used(), Load: -1}
	rep.LoadEnd = loadAverage()
	if err := errors.Join(stop(), churnErr); err != nil {
		return rep, err
	}
	rep.NotHeldCount = len(run.notHeld)
	rep.CPU.Answered = len(run.notHeld) + len(run.heldTook)
	rep.NotHeld = summarize(run.notHeld)
	rep.HeldTook = summarize(run.heldTook)
	n := float64(rep.Members)
	rep.PerMember = (float64(rep.Idle.Live()) - float64(rep.Groups.Live())) / n
	rep.PerParked = (float64(rep.Parked.Live()) - float64(rep.Idle.Live())) / n
	rep.RSSPerMember = (float64(rep.Idle.RSS) - float64(rep.Groups.RSS)) / n
	rep.RSSPerParked = (float64(rep.Parked.RSS) - float64(rep.Idle.RSS)) / n
	return rep, nil
}

// churn joins cfg.Churn members a second to the groups in turn for
// cfg.Duration; each runs as the others do and leaves after
// cfg.ChurnLife. It returns once the last has left.
func churn(ctx context.Context, run *heldRun, cfg HeldConfig, prefix func(int) string, wg *sync.WaitGroup, fail func(error)) error {
	life := cfg.ChurnLife
	if life <= 0 {
		life = 3 * run.interval
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Churn))
	defer tick.Stop()
	end := time.After(cfg.Duration)
	var churned sync.WaitGroup
	defer churned.Wait()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-end:
			return nil
		case <-tick.C:
		}
		m := &heldMember{client: run.churnClient, prefix: prefix(n % cfg.Groups), id: fmt.Sprintf("churn%d", n),
			owned: []protocol.Shard{}, revoking: []protocol.RevokingShard{}}
		churned.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer churned.Done()
			run.record(func(rep *HeldReport) { rep.Joined++ })
			lifeCtx, cancel := context.WithTimeout(ctx, life)
			err := run.loop(lifeCtx, m)
			cancel()
			if err == nil && ctx.Err() == nil {
				m.epoch = -1 // leave, unheld
				_, _, _, err = run.beat(ctx, m)
				run.record(func(rep *HeldReport) { rep.Left++ })
			}
			if err != nil && ctx.Err() == nil {
				fail(err)
			}
		}()
	}
}

// settleHeld heartbeats every member, unheld, Conns at a time, until a
// whole sweep is quiet (every answer OK, nothing pending, nothing moved),
// and sets run.rep.Interval from the answers.
func settleHeld(ctx context.Context, run *heldRun, members []*heldMember) error {
	var interval atomic.Int64
	for sweep := 0; sweep < 100; sweep++ {
		var quiet atomic.Bool
		quiet.Store(true)
		err := forEach(ctx, run.cfg.Conns, len(members), func(i int) error {
			m := members[i]
			before := len(m.owned)
			req := m.request(0)
			resp, err := run.client.Heartbeat(ctx, m.prefix, m.prefix, &req)
			for try := 1; err != nil && try < 5 && ctx.Err() == nil; try++ {
				// A transient connection failure: the same request again.
				time.Sleep(time.Duration(try) * errBackoffMin)
				resp, err = run.client.Heartbeat(ctx, m.prefix, m.prefix, &req)
			}
			if err != nil {
				return fmt.Errorf("join %s/%s: %w", m.prefix, m.id, err)
			}
			m.apply(resp)
			if resp.Status != protocol.StatusOK || len(resp.Assignment.PendingShards) > 0 || len(m.revoking) > 0 || before != len(m.owned) {
				quiet.Store(false)
			}
			interval.Store(resp.HeartbeatIntervalMs)
			return nil
		})
		if err != nil {
			return fmt.Errorf("held: settle: %w", err)
		}
		if quiet.Load() {
			run.rep.Interval = time.Duration(interval.Load()) * time.Millisecond
			if run.rep.Interval <= 0 {
				return errors.New("held: the coordinator answered no heartbeat interval")
			}
			return nil
		}
	}
	return errors.New("held: the groups did not settle in 100 sweeps")
}

// ReadServerMemory collects garbage on the server and reads its memory:
// heap and stacks from /debug/pprof/heap?gc=1&debug=1 (runtime.MemStats
// after a GC), RSS from process_resident_memory_bytes in /metrics. admin
// needs the ADMIN role.
func ReadServerMemory(ctx context.Context, admin *coordclient.Client) (ServerMemory, error) {
	var m ServerMemory
	raw, err := admin.Do(ctx, http.MethodGet, "/debug/pprof/heap?gc=1&debug=1", nil, nil)
	if err != nil {
		return m, fmt.Errorf("server memory: %w", err)
	}
	stats := memStats(raw)
	var ok1, ok2 bool
	m.HeapAlloc, ok1 = stats["HeapAlloc"]
	m.StackInuse, ok2 = stats["Stack"]
	if !ok1 || !ok2 {
		return m, errors.New("server memory: the heap profile lists no HeapAlloc or Stack")
	}
	raw, err = admin.Do(ctx, http.MethodGet, "/metrics", nil, nil)
	if err != nil {
		return m, fmt.Errorf("server memory: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return m, fmt.Errorf("server memory: process_resident_memory_bytes %q: %w", v, err)
			}
			m.RSS = uint64(f)
		}
	}
	return m, nil
}

// memStats reads the "# Name = value" lines net/http/pprof appends to a
// debug=1 heap profile (runtime.MemStats).
func memStats(profile []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok || strings.ContainsAny(name, " \t") {
			continue
		}
		// "Stack = inuse / sys" names two figures: the first is in use.
		value, _, _ = strings.Cut(value, " ")
		if v, err := strconv.ParseUint(value, 10, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// openFiles is cfg.OpenFiles(), or -1 without it.
func openFiles(cfg HeldConfig) (int, error) {
	if cfg.OpenFiles == nil {
		return -1, nil
	}
	n, err := cfg.OpenFiles()
	if err != nil {
		return -1, fmt.Errorf("held: server's open files: %w", err)
	}
	return n, nil
}

// steadyOpenFiles is openFiles once it stopped changing for 100 ms (the
// server closes its side of the connections the bench just closed a
// little later), or after 2 s.
func steadyOpenFiles(ctx context.Context, cfg HeldConfig) (int, error) {
	last, err := openFiles(cfg)
	for try := 0; err == nil && try < 20 && ctx.Err() == nil; try++ {
		time.Sleep(100 * time.Millisecond)
		var n int
		if n, err = openFiles(cfg); err == nil && n == last {
			break
		}
		last = n
	}
	return last, err
}

// loadAverage is the 1-minute load average, or -1 where the system does
// not tell.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(raw) + " x")[0], 64)
	if err != nil {
		return -1
	}
	return f
}
