package bench

// The CPU a server process spends per heartbeat: steady heartbeats and held
// ones (HTTP/1.1 keep-alive and HTTP/2 over cleartext), each against a
// bare gin echo of the same bodies in a process of its own, loaded by this
// process in the same run.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// CPUServer is a server process a CPU run loads: its base URL and the
// reader of the CPU time it has used so far ([ProcessCPU]).
type CPUServer struct {
	URL string
	CPU func() (time.Duration, error) `json:"-"`
}

// CPUConfig describes a CPU-per-heartbeat run.
type CPUConfig struct {
	// Coordinator is rscoord serve; Baseline the gin echo
	// ([BaselineHandler], which holds an answer for its waitMs).
	Coordinator CPUServer `json:"-"`
	Baseline    CPUServer `json:"-"`
	// Credentials authenticate every call to both (the echo ignores
	// them); they need MEMBER and READ on the bench's streams.
	Credentials coordclient.Credentials `json:"-"`
	// Admin creates the streams.
	Admin coordclient.Credentials `json:"-"`
	// Groups, Members (per group) and Shards (per stream) size the load.
	Groups, Members, Shards int
	// Conns is the number of clients of the steady phases.
	Conns int
	// Interval, when positive, paces the steady phases: every member
	// heartbeats once per Interval, so that both servers answer the same
	// rate. Zero runs them closed loop: each client sends again as soon
	// as it is answered, and a server that answers faster gets more.
	Interval time.Duration
	// Duration is how long each measured phase sends.
	Duration time.Duration
	// Rounds repeats every phase pair, the order of server and baseline
	// alternating.
	Rounds int
	// Wait is the waitMs of the held phases; zero runs no held phase.
	Wait time.Duration
	// PerConn is how many held members share one HTTP/2 connection.
	PerConn int
	// Probes members send unheld heartbeats during the held phases,
	// ProbeRate a second in all, timed: the answers that are not held.
	Probes    int
	ProbeRate float64
	// OnPhase, when set, is called as a server's measured phase starts
	// (kind: steady, steady-at-held-rate, held-http1, held-h2c; first:
	// its first round) and returns a function called as it ends: a
	// profiler.
	OnPhase func(ctx context.Context, kind string, first bool) func() `json:"-"`
}

// CPUPhase is one server's measured phase.
type CPUPhase struct {
	// Answers is what the server answered in the phase, of which Held
	// were held (held phases).
	Answers int `json:"answers"`
	Held    int `json:"held"`
	Errors  int `json:"errors"`
	// FirstError is the first error of a held phase, to tell what the
	// errors were.
	FirstError string `json:"firstError,omitempty"`
	// PerSecond is Answers a second of the phase.
	PerSecond float64 `json:"perSecond"`
	// CPU is what the server process spent over the phase, and PerAnswer
	// that over Answers.
	CPU       time.Duration `json:"cpuNanos"`
	PerAnswer time.Duration `json:"perAnswerNanos"`
	// Latency is the steady heartbeats' (steady phase) or the probes'
	// (held phases: the answers not held).
	Latency Latencies `json:"latency"`
}

// CPUPair is one phase of both servers and the coordinator's CPU per
// answer over the baseline's.
type CPUPair struct {
	Coordinator CPUPhase `json:"coordinator"`
	Baseline    CPUPhase `json:"baseline"`
	Ratio       float64  `json:"cpuRatio"`
	// P99Ratio is the coordinator's p99 over the baseline's.
	P99Ratio float64 `json:"p99Ratio"`
}

// CPURound is one round of every phase kind.
type CPURound struct {
	Steady CPUPair `json:"steady"`
	// AtHeldRate is a steady phase paced at the held phases' rate: every
	// member heartbeats once per Wait, not held (held phases only).
	AtHeldRate *CPUPair `json:"steadyAtHeldRate,omitempty"`
	HeldH1     *CPUPair `json:"heldHttp1,omitempty"`
	HeldH2C    *CPUPair `json:"heldH2c,omitempty"`
}

// CPUMedians are the medians over rounds of one phase kind.
type CPUMedians struct {
	Coordinator time.Duration `json:"coordinatorPerAnswerNanos"`
	Baseline    time.Duration `json:"baselinePerAnswerNanos"`
	Ratio       float64       `json:"cpuRatio"`
	P99Ratio    float64       `json:"p99Ratio"`
	// OverSteady is the coordinator's CPU per answer over its steady
	// heartbeat's of the same round (held phases), and OverAtHeldRate
	// over its steady heartbeat's at the held phases' rate. A server
	// spends less per answer the more answers each wake-up and system
	// call serve, so the closed-loop steady phase, several times the held
	// rate, is the cheaper per answer for that alone.
	OverSteady     float64 `json:"overSteady,omitempty"`
	OverAtHeldRate float64 `json:"overSteadyAtHeldRate,omitempty"`
}

// CPUReport is the outcome of a CPU run.
type CPUReport struct {
	Config  CPUConfig   `json:"config"`
	Join    JoinReport  `json:"join"`
	Rounds  []CPURound  `json:"rounds"`
	Steady  CPUMedians  `json:"steady"`
	HeldH1  *CPUMedians `json:"heldHttp1,omitempty"`
	HeldH2C *CPUMedians `json:"heldH2c,omitempty"`
}

// RunCPU joins the members to the coordinator, then runs cfg.Rounds
// rounds of a steady phase (over HTTP/1.1 keep-alive, closed loop or paced
// by cfg.Interval) and, with cfg.Wait, a steady phase paced at the held
// rate and two held phases (every member but the probes holding its
// heartbeat for cfg.Wait: over HTTP/1.1, a connection each; over h2c,
// cfg.PerConn to a connection), each against the coordinator and the
// baseline, and reports each server's CPU per answer.
func RunCPU(ctx context.Context, cfg CPUConfig) (CPUReport, error) {
	cfg.Rounds = max(cfg.Rounds, 1)
	if cfg.Groups < 1 || cfg.Members < 1 || cfg.Conns < 1 || cfg.Duration <= 0 {
		return CPUReport{}, errors.New("cpu: groups, members, conns and duration must be positive")
	}
	n := cfg.Groups * cfg.Members
	if cfg.Wait > 0 && (cfg.Probes < 1 || cfg.Probes >= n || cfg.ProbeRate <= 0 || cfg.PerConn < 1) {
		return CPUReport{}, fmt.Errorf("cpu: held phases need 1 ≤ probes < %d members, a positive probe rate and members per connection", n)
	}
	admin, err := newClient(cfg.Coordinator.URL, cfg.Admin, 4)
	if err != nil {
		return CPUReport{}, err
	}
	defer admin.CloseIdleConnections()
	if err := forEach(ctx, 4, cfg.Groups, func(g int) error {
		return CreateStream(ctx, admin, benchPrefix(g), cfg.Shards)
	}); err != nil {
		return CPUReport{}, err
	}
	// One pool for the steady phases and the probes, with room for every
	// held member's own connection in the HTTP/1.1 held phase.
	coord, err := newClient(cfg.Coordinator.URL, cfg.Credentials, n+cfg.Conns)
	if err != nil {
		return CPUReport{}, err
	}
	defer coord.CloseIdleConnections()
	base, err := newClient(cfg.Baseline.URL, cfg.Credentials, n+cfg.Conns)
	if err != nil {
		return CPUReport{}, err
	}
	defer base.CloseIdleConnections()
	start := time.Now()
	hb := HeartbeatConfig{Groups: cfg.Groups, Members: cfg.Members, Conns: cfg.Conns}
	members, sweeps, beats, err := joinAll(ctx, coord, hb)
	if err != nil {
		return CPUReport{}, err
	}
	rep := CPUReport{Config: cfg, Join: JoinReport{Settle: time.Since(start), Sweeps: sweeps, Heartbeats: beats}}
	servers := []struct {
		srv    CPUServer
		client *coordclient.Client
		take   bool
	}{{cfg.Coordinator, coord, true}, {cfg.Baseline, base, false}}
	// phase measures both servers in the round's order.
	phase := func(r int, kind string, do func(srv CPUServer, c *coordclient.Client, take bool) (CPUPhase, error)) (CPUPair, error) {
		var pair CPUPair
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			s := servers[i]
			// Every phase starts from a settled group, untimed.
			if _, _, err := settle(ctx, coord, cfg.Conns, members); err != nil {
				return pair, err
			}
			var done func()
			if i == 0 && cfg.OnPhase != nil {
				done = cfg.OnPhase(ctx, kind, r == 0)
			}
			p, err := do(s.srv, s.client, s.take)
			if done != nil {
				done()
			}
			if err != nil {
				return pair, fmt.Errorf("%s phase: %w", kind, err)
			}
			if i == 0 {
				pair.Coordinator = p
			} else {
				pair.Baseline = p
			}
		}
		if pair.Baseline.PerAnswer > 0 {
			pair.Ratio = float64(pair.Coordinator.PerAnswer) / float64(pair.Baseline.PerAnswer)
		}
		if pair.Baseline.Latency.P99 > 0 {
			pair.P99Ratio = float64(pair.Coordinator.Latency.P99) / float64(pair.Baseline.Latency.P99)
		}
		return pair, nil
	}
	for r := range cfg.Rounds {
		var round CPURound
		if round.Steady, err = phase(r, "steady", func(srv CPUServer, c *coordclient.Client, take bool) (CPUPhase, error) {
			return steadyCPU(ctx, cfg, srv, c, members, take)
		}); err != nil {
			return rep, err
		}
		if cfg.Wait > 0 {
			paced := cfg
			paced.Interval = cfg.Wait
			pair, err := phase(r, "steady-at-held-rate", func(srv CPUServer, c *coordclient.Client, take bool) (CPUPhase, error) {
				return steadyCPU(ctx, paced, srv, c, members, take)
			})
			if err != nil {
				return rep, err
			}
			round.AtHeldRate = &pair
			for _, h2c := range []bool{false, true} {
				kind := "held-http1"
				if h2c {
					kind = "held-h2c"
				}
				pair, err := phase(r, kind, func(srv CPUServer, c *coordclient.Client, take bool) (CPUPhase, error) {
					return heldCPU(ctx, cfg, srv, c, members, take, h2c)
				})
				if err != nil {
					return rep, err
				}
				if h2c {
					round.HeldH2C = &pair
				} else {
					round.HeldH1 = &pair
				}
			}
		}
		rep.Rounds = append(rep.Rounds, round)
	}
	rep.Steady = medians(rep.Rounds, func(r CPURound) *CPUPair { return &r.Steady })
	if cfg.Wait > 0 {
		h1 := medians(rep.Rounds, func(r CPURound) *CPUPair { return r.HeldH1 })
		h2 := medians(rep.Rounds, func(r CPURound) *CPUPair { return r.HeldH2C })
		rep.HeldH1, rep.HeldH2C = &h1, &h2
	}
	return rep, nil
}

// medians are the medians over rounds of the pairs pick chooses.
func medians(rounds []CPURound, pick func(CPURound) *CPUPair) CPUMedians {
	var coord, base, ratio, p99, over, overPaced []float64
	for _, r := range rounds {
		p := pick(r)
		coord = append(coord, float64(p.Coordinator.PerAnswer))
		base = append(base, float64(p.Baseline.PerAnswer))
		ratio = append(ratio, p.Ratio)
		p99 = append(p99, p.P99Ratio)
		if s := r.Steady.Coordinator.PerAnswer; s > 0 {
			over = append(over, float64(p.Coordinator.PerAnswer)/float64(s))
		}
		if r.AtHeldRate != nil && r.AtHeldRate.Coordinator.PerAnswer > 0 {
			overPaced = append(overPaced, float64(p.Coordinator.PerAnswer)/float64(r.AtHeldRate.Coordinator.PerAnswer))
		}
	}
	m := CPUMedians{Coordinator: time.Duration(median(coord)), Baseline: time.Duration(median(base)),
		Ratio: median(ratio), P99Ratio: median(p99), OverSteady: median(over)}
	if len(overPaced) > 0 {
		m.OverAtHeldRate = median(overPaced)
	}
	return m
}

// cpuWindow reads a server's CPU at the start and end of a phase.
type cpuWindow struct {
	read  func() (time.Duration, error)
	start time.Duration
	t0    time.Time
}

func openWindow(srv CPUServer) (*cpuWindow, error) {
	c, err := srv.CPU()
	if err != nil {
		return nil, err
	}
	return &cpuWindow{read: srv.CPU, start: c, t0: time.Now()}, nil
}

// close fills p's CPU figures for the phase since openWindow.
func (w *cpuWindow) close(p *CPUPhase) error {
	c, err := w.read()
	if err != nil {
		return err
	}
	elapsed := time.Since(w.t0)
	p.CPU = c - w.start
	if p.Answers > 0 {
		p.PerAnswer = p.CPU / time.Duration(p.Answers)
	}
	p.PerSecond = float64(p.Answers) / elapsed.Seconds()
	return nil
}

// echoBeat sends m's next heartbeat and, with take, applies the answer
// (the coordinator's); the baseline's answers are not applied, so that
// the member stays as the coordinator left it.
func (m *simMember) echoBeat(ctx context.Context, c *coordclient.Client, wait time.Duration, take bool) (protocol.HeartbeatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	req := m.next(m.id)
	req.WaitMs = wait.Milliseconds()
	resp, err := c.Heartbeat(ctx, m.prefix, m.group, &req)
	if err == nil && take {
		m.take(resp)
	}
	return resp, err
}

// steadyCPU is a closed-loop steady phase against srv.
func steadyCPU(ctx context.Context, cfg CPUConfig, srv CPUServer, c *coordclient.Client, members []*simMember, take bool) (CPUPhase, error) {
	w, err := openWindow(srv)
	if err != nil {
		return CPUPhase{}, err
	}
	hb := HeartbeatConfig{Conns: cfg.Conns, Duration: cfg.Duration, Interval: cfg.Interval}
	var res PhaseResult
	if cfg.Interval > 0 {
		res = pace(ctx, hb, len(members), func(m int) (bool, error) {
			resp, err := members[m].echoBeat(ctx, c, 0, take)
			return err == nil && resp.Status == protocol.StatusOK, err
		})
	} else {
		res = drive(ctx, hb, func(worker, i int) (bool, error) {
			resp, err := members[(i*cfg.Conns+worker)%len(members)].echoBeat(ctx, c, 0, take)
			return err == nil && resp.Status == protocol.StatusOK, err
		})
	}
	p := CPUPhase{Answers: res.Requests, Errors: res.Errors, Latency: res.Latency}
	return p, w.close(&p)
}

// heldCPU is a held phase against srv: every member past the probes
// heartbeats with waitMs cfg.Wait, again as each answer comes, for
// cfg.Duration, then the phase waits for the last answers; the probes
// heartbeat without waitMs, cfg.ProbeRate a second in all. The CPU
// window opens once every held member has had one answer (its connection
// open), so that it counts answers, not dials.
func heldCPU(ctx context.Context, cfg CPUConfig, srv CPUServer, steady *coordclient.Client, members []*simMember, take, h2c bool) (CPUPhase, error) {
	held := members[cfg.Probes:]
	clients := make([]*coordclient.Client, 0, len(held)/cfg.PerConn+1)
	clientOf := func(i int) *coordclient.Client { return steady }
	if h2c {
		auth, err := cfg.Credentials.Authorization()
		if err != nil {
			return CPUPhase{}, err
		}
		for range (len(held) + cfg.PerConn - 1) / cfg.PerConn {
			c, err := coordclient.New([]string{srv.URL}, coordclient.Options{Authorization: auth, UserAgent: "rscoord-bench",
				H2C: true, Timeout: 30 * time.Second})
			if err != nil {
				return CPUPhase{}, err
			}
			clients = append(clients, c)
		}
		clientOf = func(i int) *coordclient.Client { return clients[i/cfg.PerConn] }
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	var (
		stop       atomic.Bool
		measuring  atomic.Bool
		answered   atomic.Int64
		heldN      atomic.Int64
		errs       atomic.Int64
		firstErr   atomic.Pointer[string]
		warm       sync.WaitGroup
		wg         sync.WaitGroup
		probeMu    sync.Mutex
		probeTimes []time.Duration
	)
	warm.Add(len(held))
	for i, m := range held {
		wg.Go(func() {
			first := true
			for !stop.Load() && ctx.Err() == nil {
				t0 := time.Now()
				resp, err := m.echoBeat(ctx, clientOf(i), cfg.Wait, take)
				switch {
				case err != nil:
					errs.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
				case measuring.Load():
					answered.Add(1)
					if time.Since(t0) >= cfg.Wait/2 {
						heldN.Add(1)
					}
				}
				_ = resp
				if first {
					first = false
					warm.Done()
				}
			}
		})
	}
	warm.Wait()
	w, err := openWindow(srv)
	if err != nil {
		stop.Store(true)
		wg.Wait()
		return CPUPhase{}, err
	}
	measuring.Store(true)
	probes := members[:cfg.Probes]
	every := time.Duration(float64(time.Second) * float64(len(probes)) / cfg.ProbeRate)
	var pg sync.WaitGroup
	for k, m := range probes {
		pg.Go(func() {
			next := time.Now().Add(every * time.Duration(k) / time.Duration(len(probes)))
			for !stop.Load() && ctx.Err() == nil {
				if d := time.Until(next); d > 0 {
					sleepCtx(ctx, d)
				}
				next = next.Add(every)
				t0 := time.Now()
				if _, err := m.echoBeat(ctx, steady, 0, take); err != nil {
					errs.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				took := time.Since(t0)
				answered.Add(1)
				probeMu.Lock()
				probeTimes = append(probeTimes, took)
				probeMu.Unlock()
			}
		})
	}
	sleepCtx(ctx, cfg.Duration)
	stop.Store(true)
	pg.Wait()
	wg.Wait()
	p := CPUPhase{Answers: int(answered.Load()), Held: int(heldN.Load()), Errors: int(errs.Load()), Latency: summarize(probeTimes)}
	if msg := firstErr.Load(); msg != nil {
		p.FirstError = *msg
	}
	if err := w.close(&p); err != nil {
		return p, err
	}
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	return p, nil
}

// ServeBaseline serves BaselineHandler over HTTP/1.1 and h2c on addr
// until ctx ends, and tells ready its base URL: the gin echo process of a
// CPU run.
func ServeBaseline(ctx context.Context, addr string, ready func(url string)) error {
	srv := &http.Server{Handler: BaselineHandler(), ReadHeaderTimeout: 10 * time.Second}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("baseline listen: %w", err)
	}
	ready("http://" + ln.Addr().String())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
