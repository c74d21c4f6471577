package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
)

// HeldConfig describes a held-heartbeat run: Groups streams of Shards
// shards, each with Members members that settle and then hold every steady
// heartbeat for the interval (waitMs), as package member does, on
// keep-alive connections. While they are parked, Churn members a second
// join a group, live a few intervals and leave, so that the group's
// targets change and some parked answers are released early; the run
// times the answers that were not held. The held members (the load) run in
// this process, or with LoadCommand in one of their own, at a lower CPU
// priority with LoadNice: as members on other machines, they take only
// the CPU the server and the timed churn leave.
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
	// LoadCommand, when set, is the command line of a process whose main
	// calls ServeHeldLoad: the held members run there, and this process
	// keeps the setup, the memory readings and the churn. LoadEnv is
	// added to its environment. LoadNice (1–19) starts it with nice -n
	// LoadNice (coreutils), so that every thread of it is niced; RunHeld
	// checks them. Without LoadCommand the held members run in this
	// process and LoadNice must be 0.
	LoadCommand []string `json:"loadCommand,omitempty"`
	LoadEnv     []string `json:"-"`
	LoadNice    int      `json:"loadNice,omitempty"`
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
	// is (Parked − Idle) / HeldAtOnce: a parked answer with its connection.
	// RSS figures likewise.
	PerMember, PerParked       float64
	RSSPerMember, RSSPerParked float64
	// HeldAtOnce is how many members had a heartbeat in flight when
	// Parked was read (at least 99% of them); MembersHeld how many had
	// sent a held heartbeat by then (all, or the run stops).
	HeldAtOnce  int64 `json:"heldAtOnce"`
	MembersHeld int64 `json:"membersHeld"`
	// Connections is how many more descriptors the server had open with
	// every member parked than with every member idle: the members'
	// connections (-1 when not counted).
	Connections int `json:"connections"`
	// NotHeld are the answers to the churn members' requests without
	// waitMs during the measured phase (joins, leaves, reports of revoked
	// shards), timed by this process: the figure of the target.
	NotHeld      Latencies `json:"notHeld"`
	NotHeldCount int       `json:"notHeldCount"`
	// HeldTook is how long the held members' held requests took: about
	// the interval, unless released early or answered at once.
	HeldTook Latencies `json:"heldTook"`
	// HeldCount, Early and AtOnce count the held requests answered during
	// the measured phase (held members and churn): Early with news before
	// their wait was over; AtOnce within 50 ms with nothing new (the
	// coordinator held no more, its cap, or a change raced them).
	HeldCount int `json:"heldCount"`
	Early     int `json:"early"`
	AtOnce    int `json:"atOnce"`
	// Load and Churn are what each side timed: the held members (in
	// their process, niced or not) and the churn members (in this one).
	Load  HeldAnswers `json:"load"`
	Churn HeldAnswers `json:"churn"`
	// AskedPerSecond is the held answers a second the held members ask
	// for (one per member per interval); HeldPerSecond is what they got
	// during the measured phase.
	AskedPerSecond float64 `json:"askedPerSecond"`
	HeldPerSecond  float64 `json:"heldPerSecond"`
	// ProberLag is how late a 10 ms sleep of this process (the one timing
	// the churn) woke during the measured phase: its own wait for a CPU,
	// inside every latency it timed.
	ProberLag Latencies `json:"proberLag"`
	// LoadThreads is how many threads the held members' process had, each
	// checked to run at Config.LoadNice (0 when they ran in this process).
	LoadThreads int `json:"loadThreads"`
	// Joined and Left count the churn members.
	Joined, Left int
	// Measured is how long the measured phase lasted: Duration of joins,
	// then the last churn member's life until it left.
	Measured time.Duration `json:"measured"`
	// Errors counts failed requests; NotOK answers other than OK; both
	// sides.
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
	// ServerAtOnce is what the server's own histogram timed of the answers
	// it sent at once during the measured phase; nil when its /metrics
	// did not say.
	ServerAtOnce *ServerTimed `json:"serverAtOnce"`
	// GroupWrites is what the server's own histogram timed of its synced
	// writes of group records during the measured phase: an answer that
	// changed its group (a join, a leave) is sent once one is done. Nil
	// when its /metrics did not say.
	GroupWrites *ServerTimed `json:"groupWrites"`
}

// HeldAnswers are the answers one side of a held run timed during the
// measured phase.
type HeldAnswers struct {
	// Held counts the held requests answered, Early those with news
	// before their wait was over, AtOnce those answered within 50 ms with
	// nothing new; HeldTook is how long they took.
	Held     int       `json:"held"`
	Early    int       `json:"early"`
	AtOnce   int       `json:"atOnce"`
	HeldTook Latencies `json:"heldTook"`
	// NotHeld counts the requests without waitMs, NotHeldTook times them.
	NotHeld     int       `json:"notHeld"`
	NotHeldTook Latencies `json:"notHeldTook"`
	// Answered is every request that ended during the phase, failed ones
	// among them.
	Answered      int            `json:"answered"`
	Errors        int            `json:"errors"`
	NotOK         int            `json:"notOK"`
	NotOKByStatus map[string]int `json:"notOKByStatus,omitempty"`
	// Measured is how long this side counted.
	Measured time.Duration `json:"measured"`
}

// HeldLoadMet is the share of the asked held answers a second the held
// members must get for a run's latencies to count: below it the load
// generator (short of CPU) or the server fell behind, and the server did
// not carry the load asked.
const HeldLoadMet = 0.97

// LoadMet says whether the server was offered the load asked: every
// member held before the measured phase, and at least HeldLoadMet
// of the held answers a second asked; if not, why.
func (r HeldReport) LoadMet() (bool, string) {
	var why []string
	if r.MembersHeld < int64(r.Members) {
		why = append(why, fmt.Sprintf("only %d of %d members held", r.MembersHeld, r.Members))
	}
	if r.AskedPerSecond <= 0 || r.HeldPerSecond < HeldLoadMet*r.AskedPerSecond {
		why = append(why, fmt.Sprintf("%.0f held answers a second of the %.0f asked (below %.0f%%): the members or the server fell behind", r.HeldPerSecond, r.AskedPerSecond, 100*HeldLoadMet))
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// MeetsNotHeldP99 says whether the run meets a p99 target for the answers
// not held: answers timed, none failed, the p99 within target, and the
// load met (a load generator that fell behind offered less than asked);
// if not, why.
func (r HeldReport) MeetsNotHeldP99(target time.Duration) (bool, string) {
	var why []string
	if r.NotHeldCount == 0 {
		why = append(why, "no answers not held timed")
	} else if r.NotHeld.P99 > target {
		why = append(why, fmt.Sprintf("p99 %v over %v", r.NotHeld.P99, target))
	}
	if r.Errors > 0 {
		why = append(why, fmt.Sprintf("%d requests failed", r.Errors))
	}
	if ok, reason := r.LoadMet(); !ok {
		why = append(why, "load not met: "+reason)
	}
	return len(why) == 0, strings.Join(why, "; ")
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

// AskedCores extrapolates the CPU the asked load takes: each process's
// cores over the measured phase, scaled from the held answers a second the
// members got to those they asked. Below the asked rate a server and its
// load generator that share a machine may simply not fit on it; the sum
// says whether they can. ok is false when a figure is unknown or nothing
// was held.
func (r HeldReport) AskedCores() (server, members float64, ok bool) {
	if r.CPU.Server < 0 || r.Measured <= 0 || r.HeldPerSecond <= 0 || r.AskedPerSecond <= 0 {
		return 0, 0, false
	}
	load := r.CPU.Load
	if load < 0 {
		load = r.CPU.Bench // the members ran in the bench's own process
	}
	if load < 0 {
		return 0, 0, false
	}
	scale := r.AskedPerSecond / r.HeldPerSecond
	secs := r.Measured.Seconds()
	return scale * r.CPU.Server.Seconds() / secs, scale * load.Seconds() / secs, true
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

// RunHeld creates the streams, joins every member, parks them and
// measures the server's memory and the answers that were not held.
func RunHeld(ctx context.Context, cfg HeldConfig) (HeldReport, error) {
	if cfg.Groups <= 0 || cfg.Members <= 0 || cfg.Shards <= 0 || cfg.Duration <= 0 {
		return HeldReport{}, fmt.Errorf("held: groups, members, shards and duration must be positive: %+v", cfg)
	}
	if cfg.LoadNice < 0 || cfg.LoadNice > 19 || (cfg.LoadNice != 0 && len(cfg.LoadCommand) == 0) {
		return HeldReport{}, fmt.Errorf("held: the load's niceness %d must be 1–19, with a load command, or 0", cfg.LoadNice)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "held"
	}
	if cfg.Churn <= 0 {
		cfg.Churn = 1
	}
	if cfg.H2C && cfg.MembersPerConn <= 0 {
		cfg.MembersPerConn = 100
	}
	cfg.Conns = max(cfg.Conns, 1)
	rep := HeldReport{Config: cfg, Members: cfg.Groups * cfg.Members}
	admin, err := newClient(cfg.Server, cfg.Admin, 4)
	if err != nil {
		return rep, err
	}
	defer admin.CloseIdleConnections()
	params := heldLoadParams{Server: cfg.Server, Member: cfg.Member, Groups: cfg.Groups, Members: cfg.Members,
		Conns: cfg.Conns, H2C: cfg.H2C, MembersPerConn: cfg.MembersPerConn, Prefix: cfg.Prefix}
	for g := range cfg.Groups {
		if err := CreateStream(ctx, admin, params.stream(g), cfg.Shards); err != nil {
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

	// The held members join, unheld, Conns at a time, until a sweep is
	// quiet.
	var load heldLoad = &localLoad{}
	var loadCPU func() (time.Duration, error)
	if len(cfg.LoadCommand) > 0 {
		child, err := startChildLoad(cfg.LoadCommand, cfg.LoadEnv, cfg.LoadNice)
		if err != nil {
			return rep, err
		}
		load, loadCPU = child, ProcessCPU(child.cmd.Process.Pid)
	}
	defer load.close()
	rep.Interval, rep.Settle, err = load.settle(ctx, params)
	if err != nil {
		return rep, err
	}
	if c, ok := load.(*childLoad); ok {
		nices, err := niceness(c.cmd.Process.Pid)
		if err != nil {
			return rep, err
		}
		for _, n := range nices {
			if n != cfg.LoadNice {
				return rep, fmt.Errorf("held: a thread of the load process runs at niceness %d, not %d (of %v)", n, cfg.LoadNice, nices)
			}
		}
		rep.LoadThreads = len(nices)
	}
	if err := memory(&rep.Idle); err != nil {
		return rep, err
	}
	filesIdle, err := steadyOpenFiles(ctx, cfg)
	if err != nil {
		return rep, err
	}
	rep.HeldAtOnce, rep.MembersHeld, err = load.park(ctx)
	if err != nil {
		return rep, err
	}
	if err := memory(&rep.Parked); err != nil {
		return rep, err
	}
	filesParked, err := openFiles(cfg)
	if err != nil {
		return rep, err
	}
	rep.Connections = -1
	if filesIdle >= 0 && filesParked >= 0 {
		rep.Connections = filesParked - filesIdle
	}

	// The measured phase: churn members join and leave while the held
	// members stay parked. The churn has a client of its own (over HTTP/2
	// one more connection).
	auth, err := cfg.Member.Authorization()
	if err != nil {
		return rep, err
	}
	churnOpts := coordclient.Options{Authorization: auth, UserAgent: "rscoord-bench", H2C: cfg.H2C}
	if !cfg.H2C {
		conns := int(cfg.Churn*10) + 16
		churnOpts.HTTPClient = &http.Client{Transport: &http.Transport{
			MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
		}}
	}
	churnClient, err := coordclient.New([]string{cfg.Server}, churnOpts)
	if err != nil {
		return rep, err
	}
	defer churnClient.CloseIdleConnections()
	prober := &heldRun{interval: rep.Interval}
	if err := load.measure(ctx); err != nil {
		return rep, err
	}
	rep.LoadStart = loadAverage()
	// Unknown rather than an error: a server without the label is still
	// measured from this side.
	timedBefore, timedErr := readServerHistograms(ctx, admin)
	serverCPU, benchCPU, loadCPUUsed := startCPU(cfg.ServerCPU), startCPU(selfCPU), startCPU(loadCPU)
	prober.startCounting()
	measureStart := time.Now()
	measureCtx, endMeasure := context.WithCancel(ctx)
	defer endMeasure()
	// A load process that dies ends the phase.
	if ended := load.ended(); ended != nil {
		go func() {
			select {
			case <-ended:
				endMeasure()
			case <-measureCtx.Done():
			}
		}()
	}
	var onMeasure sync.WaitGroup
	var lags []time.Duration
	onMeasure.Go(func() { lags = sleepLags(measureCtx, 10*time.Millisecond) })
	if cfg.OnMeasure != nil {
		onMeasure.Go(func() { cfg.OnMeasure(measureCtx) })
	}
	var churnErr error
	rep.Joined, rep.Left, churnErr = churn(measureCtx, prober, churnClient, cfg, params.stream)
	died := measureCtx.Err() != nil && ctx.Err() == nil
	endMeasure()
	onMeasure.Wait()
	rep.ProberLag = summarize(lags)
	rep.Churn = prober.stopCounting()
	rep.Measured = time.Since(measureStart)
	rep.CPU = HeldCPU{Server: serverCPU.used(), Bench: benchCPU.used(), Load: loadCPUUsed.used()}
	if timedErr == nil {
		if timedAfter, err := readServerHistograms(ctx, admin); err == nil {
			atOnce := timedBetween(timedBefore.atOnce, timedAfter.atOnce)
			writes := timedBetween(timedBefore.groupWrites, timedAfter.groupWrites)
			rep.ServerAtOnce, rep.GroupWrites = &atOnce, &writes
		}
	}
	rep.LoadEnd = loadAverage()
	if churnErr != nil || died {
		return rep, errors.Join(churnErr, ctx.Err(), load.close(), errors.New("held: the measured phase ended early"))
	}
	rep.Load, err = load.stop(ctx)
	if err != nil {
		return rep, err
	}
	rep.NotHeldCount, rep.NotHeld = rep.Churn.NotHeld, rep.Churn.NotHeldTook
	rep.HeldTook = rep.Load.HeldTook
	rep.HeldCount = rep.Load.Held + rep.Churn.Held
	rep.Early = rep.Load.Early + rep.Churn.Early
	rep.AtOnce = rep.Load.AtOnce + rep.Churn.AtOnce
	rep.Errors = rep.Load.Errors + rep.Churn.Errors
	rep.NotOK = rep.Load.NotOK + rep.Churn.NotOK
	if rep.NotOK > 0 {
		rep.NotOKByStatus = maps.Clone(rep.Load.NotOKByStatus)
		if rep.NotOKByStatus == nil {
			rep.NotOKByStatus = map[string]int{}
		}
		for k, v := range rep.Churn.NotOKByStatus {
			rep.NotOKByStatus[k] += v
		}
	}
	rep.CPU.Answered = rep.Load.Answered + rep.Churn.Answered
	rep.AskedPerSecond = float64(rep.Members) / rep.Interval.Seconds()
	if rep.Load.Measured > 0 {
		rep.HeldPerSecond = float64(rep.Load.Held) / rep.Load.Measured.Seconds()
	}
	n := float64(rep.Members)
	rep.PerMember = (float64(rep.Idle.Live()) - float64(rep.Groups.Live())) / n
	parked := float64(max(rep.HeldAtOnce, 1))
	rep.PerParked = (float64(rep.Parked.Live()) - float64(rep.Idle.Live())) / parked
	rep.RSSPerMember = (float64(rep.Idle.RSS) - float64(rep.Groups.RSS)) / n
	rep.RSSPerParked = (float64(rep.Parked.RSS) - float64(rep.Idle.RSS)) / parked
	return rep, nil
}

// churn joins cfg.Churn members a second to the groups in turn for
// cfg.Duration; each runs as the held members do and leaves after
// cfg.ChurnLife. It returns once the last has left, with how many joined
// and left.
func churn(ctx context.Context, run *heldRun, client *coordclient.Client, cfg HeldConfig, stream func(int) string) (joined, left int, err error) {
	life := cfg.ChurnLife
	if life <= 0 {
		life = 3 * run.interval
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Churn))
	defer tick.Stop()
	end := time.After(cfg.Duration)
	var churned sync.WaitGroup
	var mu sync.Mutex
	var errs error
	var joins, leaves atomic.Int64
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
		case <-end:
		case <-tick.C:
			m := &heldMember{client: client, prefix: stream(n % cfg.Groups), id: fmt.Sprintf("churn%d", n),
				simState: newSimState()}
			churned.Go(func() {
				joins.Add(1)
				lifeCtx, cancel := context.WithTimeout(ctx, life)
				run.loop(lifeCtx, m)
				cancel()
				if ctx.Err() != nil {
					return
				}
				m.epoch = -1 // leave, unheld
				_, _, _, err := run.beat(ctx, m)
				leaves.Add(1)
				if err != nil && ctx.Err() == nil {
					mu.Lock()
					errs = errors.Join(errs, fmt.Errorf("held: churn member %s/%s leaving: %w", m.prefix, m.id, err))
					mu.Unlock()
				}
			})
			continue
		}
		churned.Wait()
		mu.Lock()
		defer mu.Unlock()
		return int(joins.Load()), int(leaves.Load()), errs
	}
}

// sleepLags sleeps d again and again until ctx ends and returns how much
// later than d each sleep woke.
func sleepLags(ctx context.Context, d time.Duration) []time.Duration {
	var lags []time.Duration
	t := time.NewTimer(d)
	defer t.Stop()
	for start := time.Now(); ; start = time.Now() {
		select {
		case <-ctx.Done():
			return lags
		case <-t.C:
			lags = append(lags, max(time.Since(start)-d, 0))
			t.Reset(d)
		}
	}
}
