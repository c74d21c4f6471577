package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/persistence"
)

// HeartbeatConfig describes a steady-heartbeat run.
type HeartbeatConfig struct {
	// Server is the coordinator's base URL, e.g. http://127.0.0.1:8080.
	Server string
	// Credentials authenticate every call (the CLI's flags and
	// environment); the zero value sends none.
	Credentials coordclient.Credentials `json:"-"`
	// Groups, Members (per group) and Shards (per stream) size the load.
	Groups, Members, Shards int
	// Duration is how long each measured phase runs.
	Duration time.Duration
	// Conns is the number of concurrent clients.
	Conns int
	// Interval, when positive, paces the load: every member heartbeats
	// once per Interval, the members' phases spread evenly over it, as a
	// fleet of real members does. Zero runs closed loop: every client
	// sends its next heartbeat as soon as the last was answered.
	Interval time.Duration
	// Rounds alternates the coordinator and baseline phases this many
	// times (coordinator first in odd rounds, baseline first in even
	// ones), so that a noisy neighbour hurts both alike. Default 1.
	Rounds int
	// WriteStats, when set, reads the coordinator's store write counters
	// (an in-process coordinator): the report then says what the join
	// phase wrote.
	WriteStats func() persistence.WriteStats `json:"-"`
}

// JoinReport is the join phase: from the first join until a whole sweep
// of heartbeats changed nothing (every member OK, nothing pending).
type JoinReport struct {
	// Settle is how long joining and settling took.
	Settle time.Duration `json:"settleNanos"`
	// Sweeps is how many sweeps of every member's heartbeat it took, and
	// Heartbeats how many heartbeats were sent in all (follow-ups
	// included, see settle).
	Sweeps     int `json:"sweeps"`
	Heartbeats int `json:"heartbeats"`
	// Commits, Keys and Bytes are what the store wrote meanwhile (zero
	// when the coordinator is not in this process), and the rates are
	// per second of Settle.
	Commits        uint64  `json:"commits,omitempty"`
	Keys           uint64  `json:"keys,omitempty"`
	Bytes          uint64  `json:"bytes,omitempty"`
	KeysPerSecond  float64 `json:"keysPerSecond,omitempty"`
	BytesPerSecond float64 `json:"bytesPerSecond,omitempty"`
	// MaxCommitBytes is the largest commit since the store opened.
	MaxCommitBytes uint64 `json:"maxCommitBytes,omitempty"`
	// SteadyKeys is what the store wrote during the measured steady phases:
	// a steady heartbeat writes nothing, so it should be zero.
	SteadyKeys uint64 `json:"steadyKeys"`
	// Measured is false when no write counters were available.
	Measured bool `json:"measured"`
}

// HeartbeatReport is the outcome of a steady-heartbeat run. Figures are
// summed over rounds; Rounds holds each round's.
type HeartbeatReport struct {
	Config      HeartbeatConfig `json:"config"`
	Requests    int             `json:"requests"`
	Errors      int             `json:"errors"`
	PerSecond   float64         `json:"perSecond"`
	Latency     Latencies       `json:"latency"`
	Baseline    PhaseResult     `json:"baseline"`
	RatioToBase float64         `json:"ratioToBaseline"`
	// NotOK counts steady heartbeats answered anything but OK: in a
	// steady group that is a bug, not load.
	NotOK int `json:"notOk"`
	// Offered is the paced rate asked for (members / interval); zero in
	// closed loop.
	Offered float64 `json:"offeredPerSecond,omitempty"`
	// Lag is, in paced mode, how late heartbeats were sent after their
	// schedule: a client that falls behind shows here, not in Latency.
	Lag    Latencies     `json:"lag,omitzero"`
	Rounds []RoundResult `json:"rounds"`
	// Join is the join phase before the measured phases.
	Join JoinReport `json:"join"`
}

// RoundResult is one round of both phases.
type RoundResult struct {
	Coordinator PhaseResult `json:"coordinator"`
	Baseline    PhaseResult `json:"baseline"`
	// Ratio is the coordinator's rate over the baseline's (closed loop),
	// or the baseline's p99 over the coordinator's (paced: both serve the
	// same offered rate, so latency is what differs).
	Ratio float64 `json:"ratio"`
}

// PhaseResult is one measured phase.
type PhaseResult struct {
	Requests  int       `json:"requests"`
	Errors    int       `json:"errors"`
	PerSecond float64   `json:"perSecond"`
	Latency   Latencies `json:"latency"`
	Lag       Latencies `json:"lag,omitzero"`

	samples, lags []time.Duration
	elapsed       time.Duration
}

// RunHeartbeat joins every member, lets the groups settle, then drives
// steady heartbeats with correct epochs for cfg.Duration, and the baseline
// (a bare gin handler decoding and answering heartbeat-shaped JSON) with
// the same clients, pacing and duration, alternating over cfg.Rounds.
func RunHeartbeat(ctx context.Context, cfg HeartbeatConfig) (HeartbeatReport, error) {
	cfg.Rounds = max(cfg.Rounds, 1)
	client, err := newClient(cfg.Server, cfg.Credentials, cfg.Conns)
	if err != nil {
		return HeartbeatReport{}, err
	}
	defer client.CloseIdleConnections()
	stats := func() persistence.WriteStats {
		if cfg.WriteStats == nil {
			return persistence.WriteStats{}
		}
		return cfg.WriteStats()
	}
	if err := forEach(ctx, cfg.Conns, cfg.Groups, func(g int) error {
		return CreateStream(ctx, client, benchPrefix(g), cfg.Shards)
	}); err != nil {
		return HeartbeatReport{}, err
	}
	before, start := stats(), time.Now()
	members, sweeps, beats, err := joinAll(ctx, client, cfg)
	if err != nil {
		return HeartbeatReport{}, err
	}
	join := JoinReport{Settle: time.Since(start), Sweeps: sweeps, Heartbeats: beats, Measured: cfg.WriteStats != nil}
	if join.Measured {
		w := stats().Sub(before)
		secs := join.Settle.Seconds()
		join.Commits, join.Keys, join.Bytes, join.MaxCommitBytes = w.Commits, w.Keys, w.Bytes, w.MaxCommitBytes
		join.KeysPerSecond, join.BytesPerSecond = float64(w.Keys)/secs, float64(w.Bytes)/secs
	}
	steadyBefore := stats()
	baseURL, stopBase, err := startBaseline()
	if err != nil {
		return HeartbeatReport{}, err
	}
	defer stopBase()
	// Same pool settings and credentials as the coordinator's client.
	baseClient, err := newClient(baseURL, cfg.Credentials, cfg.Conns)
	if err != nil {
		return HeartbeatReport{}, err
	}
	defer baseClient.CloseIdleConnections()
	var notOK atomic.Int64
	coordinator := func() PhaseResult {
		return run(ctx, cfg, len(members), func(m int) (bool, error) {
			resp, err := members[m].beat(ctx, client)
			if err != nil {
				return false, err
			}
			if resp.Status != protocol.StatusOK {
				notOK.Add(1)
			}
			return true, nil
		})
	}
	base := func() PhaseResult { return baseline(ctx, baseClient, cfg, len(members)) }
	// Every phase starts from a steady group: an untimed sweep heartbeats
	// every member first. Without it the members' leases lapse while the
	// baseline runs (two phases pass between coordinator phases when the
	// order alternates), and the next coordinator phase measures a
	// rejoin storm instead of steady heartbeats.
	var sweepErr error
	steady := func(phase func() PhaseResult) PhaseResult {
		if _, _, err := settle(ctx, client, cfg.Conns, members); err != nil {
			sweepErr = errors.Join(sweepErr, err)
		}
		return phase()
	}
	rep := HeartbeatReport{Config: cfg}
	var coordAll, baseAll PhaseResult
	for r := range cfg.Rounds {
		var round RoundResult
		if r%2 == 0 {
			round.Coordinator = steady(coordinator)
			round.Baseline = steady(base)
		} else {
			round.Baseline = steady(base)
			round.Coordinator = steady(coordinator)
		}
		round.Ratio = ratio(cfg, round.Coordinator, round.Baseline)
		coordAll.merge(round.Coordinator)
		baseAll.merge(round.Baseline)
		rep.Rounds = append(rep.Rounds, round)
	}
	coordAll.finish()
	baseAll.finish()
	rep.Requests, rep.Errors, rep.PerSecond = coordAll.Requests, coordAll.Errors, coordAll.PerSecond
	rep.Latency, rep.Lag, rep.Baseline, rep.NotOK = coordAll.Latency, coordAll.Lag, baseAll, int(notOK.Load())
	rep.RatioToBase = ratio(cfg, coordAll, baseAll)
	if cfg.Interval > 0 {
		rep.Offered = float64(len(members)) / cfg.Interval.Seconds()
	}
	rep.Join = join
	rep.Join.SteadyKeys = stats().Sub(steadyBefore).Keys
	if sweepErr != nil {
		return rep, fmt.Errorf("between phases: %w", sweepErr)
	}
	return rep, nil
}

func ratio(cfg HeartbeatConfig, coord, base PhaseResult) float64 {
	if cfg.Interval > 0 {
		if coord.Latency.P99 <= 0 {
			return 0
		}
		return float64(base.Latency.P99) / float64(coord.Latency.P99)
	}
	if base.PerSecond <= 0 {
		return 0
	}
	return coord.PerSecond / base.PerSecond
}

// merge adds another phase's samples; finish computes the summary.
func (p *PhaseResult) merge(o PhaseResult) {
	p.samples = append(p.samples, o.samples...)
	p.lags = append(p.lags, o.lags...)
	p.Errors += o.Errors
	p.elapsed += o.elapsed
}

func (p *PhaseResult) finish() {
	p.Requests = len(p.samples)
	if p.elapsed > 0 {
		p.PerSecond = float64(p.Requests) / p.elapsed.Seconds()
	}
	p.Latency = summarize(p.samples)
	if p.lags != nil {
		p.Lag = summarize(p.lags)
	}
}

// run drives a phase closed loop or paced, as cfg says; do heartbeats for
// member m of n.
func run(ctx context.Context, cfg HeartbeatConfig, n int, do func(m int) (bool, error)) PhaseResult {
	if cfg.Interval > 0 {
		return pace(ctx, cfg, n, do)
	}
	return drive(ctx, cfg, func(worker, i int) (bool, error) {
		return do((i*cfg.Conns + worker) % n)
	})
}

// newClient is a wire-layer client of server for conns concurrent callers.
func newClient(server string, creds coordclient.Credentials, conns int) (*coordclient.Client, error) {
	auth, err := creds.Authorization()
	if err != nil {
		return nil, err
	}
	return coordclient.New([]string{server}, coordclient.Options{
		Authorization: auth,
		UserAgent:     "rscoord-bench",
		HTTPClient: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, MaxConnsPerHost: conns * 2,
				IdleConnTimeout: 30 * time.Second,
			},
		},
	})
}

// drive runs do from cfg.Conns workers for cfg.Duration and measures it.
func drive(ctx context.Context, cfg HeartbeatConfig, do func(worker, i int) (bool, error)) PhaseResult {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	samples := make([][]time.Duration, cfg.Conns)
	errs := make([]int, cfg.Conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				ok, err := do(w, i)
				if err != nil || !ok {
					if ctx.Err() == nil {
						errs[w]++
					}
					continue
				}
				samples[w] = append(samples[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	res := PhaseResult{elapsed: time.Since(start)}
	for w := range cfg.Conns {
		res.samples = append(res.samples, samples[w]...)
		res.Errors += errs[w]
	}
	res.finish()
	return res
}

// pace sends every one of n members' heartbeats once per cfg.Interval for
// cfg.Duration, member m at offset m×Interval/n, from cfg.Conns workers
// (worker w sends for members w, w+Conns, …). Latency counts from the send;
// lag is how late the send was after its schedule.
func pace(ctx context.Context, cfg HeartbeatConfig, n int, do func(m int) (bool, error)) PhaseResult {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	conns := min(cfg.Conns, n)
	samples := make([][]time.Duration, conns)
	lags := make([][]time.Duration, conns)
	errs := make([]int, conns)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(cfg.Duration)
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				for m := w; m < n; m += conns {
					due := start.Add(time.Duration(k)*cfg.Interval + time.Duration(m)*cfg.Interval/time.Duration(n))
					if !due.Before(end) {
						return
					}
					if d := time.Until(due); d > 0 {
						sleepCtx(ctx, d)
					}
					if ctx.Err() != nil {
						return
					}
					t0 := time.Now()
					ok, err := do(m)
					if err != nil || !ok {
						if ctx.Err() == nil {
							errs[w]++
						}
						continue
					}
					samples[w] = append(samples[w], time.Since(t0))
					lags[w] = append(lags[w], t0.Sub(due))
				}
			}
		}()
	}
	wg.Wait()
	res := PhaseResult{elapsed: time.Since(start), lags: []time.Duration{}}
	for w := range conns {
		res.samples = append(res.samples, samples[w]...)
		res.lags = append(res.lags, lags[w]...)
		res.Errors += errs[w]
	}
	res.finish()
	return res
}

// simMember is a member that answers every heartbeat the way the member
// runtime does, enough to keep a steady group steady.
type simMember struct {
	mu                sync.Mutex
	prefix, group, id string
	simState
}

func (m *simMember) beat(ctx context.Context, client *coordclient.Client) (protocol.HeartbeatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	req := m.next(m.id)
	resp, err := client.Heartbeat(ctx, m.prefix, m.group, &req)
	if err != nil {
		return resp, err
	}
	m.take(resp)
	return resp, nil
}

// joinAll joins cfg's members to their existing streams and heartbeats
// until each group answers OK with nothing pending to every member. It
// returns the members, the number of sweeps it took and the heartbeats sent.
func joinAll(ctx context.Context, client *coordclient.Client, cfg HeartbeatConfig) ([]*simMember, int, int, error) {
	var members []*simMember
	for g := range cfg.Groups {
		prefix := benchPrefix(g)
		for i := range cfg.Members {
			members = append(members, &simMember{prefix: prefix, group: prefix, id: fmt.Sprintf("m%d", i),
				simState: newSimState()})
		}
	}
	sweeps, beats, err := settle(ctx, client, cfg.Conns, members)
	if err != nil {
		return nil, 0, 0, err
	}
	return members, sweeps, beats, nil
}

// maxFollowUps bounds the heartbeats a member sends at once, one after
// another, within one sweep (see settle).
const maxFollowUps = 4

// settle heartbeats every member, from conns callers, until a whole sweep
// is quiet: every member answered OK with nothing pending and kept its
// shards. A member the coordinator no longer knows rejoins on the way. It
// returns the number of sweeps and of heartbeats sent.
//
// Like the member runtime, a member whose answer gave it something to
// report (shards to report released, or a new set of owned shards) sends
// its next heartbeat at once rather than a sweep later: a hand-off then
// takes round trips, not sweeps. The runtime also follows up at once
// after an answer whose only news is a new epoch; those follow-ups report
// nothing and are left out here (every join moves every member's epoch).
func settle(ctx context.Context, client *coordclient.Client, conns int, members []*simMember) (int, int, error) {
	var beats atomic.Int64
	for round := 0; round < 50; round++ {
		quiet := true
		var mu sync.Mutex
		var firstErr error
		sem := make(chan struct{}, conns)
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				for n := 0; n <= maxFollowUps; n++ {
					before := slices.Clone(m.owned)
					resp, err := m.beat(ctx, client)
					beats.Add(1)
					news := len(m.revoking) > 0 || !slices.Equal(before, m.owned)
					if err != nil || n == 0 && (resp.Status != protocol.StatusOK || len(resp.Assignment.PendingShards) > 0 || news) {
						mu.Lock()
						firstErr, quiet = errors.Join(firstErr, err), false
						mu.Unlock()
					}
					if err != nil || !news {
						return
					}
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return 0, 0, fmt.Errorf("settle: %w", firstErr)
		}
		if quiet {
			return round + 1, int(beats.Load()), nil
		}
		// The coordinator may say so before a quiet sweep would: every
		// group STABLE (each live member reads exactly its target, nothing
		// blocked) with all its members live.
		if stable, err := allStable(ctx, client, members); err != nil {
			return 0, 0, fmt.Errorf("settle: %w", err)
		} else if stable {
			return round + 1, int(beats.Load()), nil
		}
	}
	return 0, 0, errors.New("settle: groups did not reach a steady state in 50 sweeps")
}

// allStable reports whether every group of members is STABLE with each of
// its members live.
func allStable(ctx context.Context, client *coordclient.Client, members []*simMember) (bool, error) {
	type key struct{ prefix, group string }
	want := map[key]int{}
	for _, m := range members {
		want[key{m.prefix, m.group}]++
	}
	for k, n := range want {
		var g protocol.GroupResponse
		if _, err := client.Do(ctx, http.MethodGet, coordclient.GroupPath(k.prefix, k.group), nil, &g); err != nil {
			return false, err
		}
		if g.State != protocol.GroupStable || len(g.TargetAssignmentSummary) != n {
			return false, nil
		}
	}
	return true, nil
}

// startBaseline serves BaselineHandler on a fresh loopback listener and
// returns its base URL.
func startBaseline() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("baseline listen: %w", err)
	}
	srv := &http.Server{Handler: BaselineHandler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	stop := func() {
		srv.Close()
		<-done
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// baseline measures BaselineHandler with the same clients, concurrency,
// pacing and duration as the coordinator phase.
func baseline(ctx context.Context, client *coordclient.Client, cfg HeartbeatConfig, n int) PhaseResult {
	req := protocol.HeartbeatRequest{
		ProtocolVersion: 1, RequestID: "r", MemberID: "m0", MemberEpoch: 5, MetadataVersion: 5,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 4, AvailableConcurrency: 4},
		OwnedShards:             protocol.Shards([]int{1, 2, 3}), RevokingShards: []protocol.RevokingShard{},
		ShardProgress: []protocol.ShardProgress{},
	}
	return run(ctx, cfg, n, func(int) (bool, error) {
		resp, err := client.Heartbeat(ctx, "bench", "bench", &req)
		if err != nil {
			return false, err
		}
		return resp.Status == protocol.StatusOK, nil
	})
}
