package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rscoord/rscoord/protocol"
)

// HeartbeatConfig describes a steady-heartbeat run.
type HeartbeatConfig struct {
	// Server is the coordinator's base URL, e.g. http://127.0.0.1:8080.
	Server string
	// Groups, Members (per group) and Shards (per stream) size the load.
	Groups, Members, Shards int
	// Duration is how long each measured phase runs.
	Duration time.Duration
	// Conns is the number of concurrent clients.
	Conns int
}

// HeartbeatReport is the outcome of a steady-heartbeat run.
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
}

// PhaseResult is one measured phase.
type PhaseResult struct {
	Requests  int       `json:"requests"`
	Errors    int       `json:"errors"`
	PerSecond float64   `json:"perSecond"`
	Latency   Latencies `json:"latency"`
}

// RunHeartbeat joins every member, lets the groups settle, then drives
// steady heartbeats with correct epochs for cfg.Duration; it then measures
// the baseline (a bare gin handler decoding and answering heartbeat-shaped
// JSON) with the same clients for the same time.
func RunHeartbeat(ctx context.Context, cfg HeartbeatConfig) (HeartbeatReport, error) {
	client := newClient(cfg.Conns)
	defer client.CloseIdleConnections()
	members, err := settle(ctx, client, cfg)
	if err != nil {
		return HeartbeatReport{}, err
	}
	var notOK int
	var mu sync.Mutex
	phase := drive(ctx, cfg, func(worker, i int) (bool, error) {
		m := members[(i*cfg.Conns+worker)%len(members)]
		resp, err := m.beat(ctx, client, cfg.Server)
		if err != nil {
			return false, err
		}
		if resp.Status != protocol.StatusOK {
			mu.Lock()
			notOK++
			mu.Unlock()
		}
		return true, nil
	})
	base, err := baseline(ctx, client, cfg)
	if err != nil {
		return HeartbeatReport{}, err
	}
	rep := HeartbeatReport{
		Config: cfg, Requests: phase.Requests, Errors: phase.Errors, PerSecond: phase.PerSecond,
		Latency: phase.Latency, Baseline: base, NotOK: notOK,
	}
	if base.PerSecond > 0 {
		rep.RatioToBase = phase.PerSecond / base.PerSecond
	}
	return rep, nil
}

func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, MaxConnsPerHost: conns * 2,
			IdleConnTimeout: 30 * time.Second,
		},
	}
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
	elapsed := time.Since(start)
	var all []time.Duration
	res := PhaseResult{}
	for w := range cfg.Conns {
		all = append(all, samples[w]...)
		res.Errors += errs[w]
	}
	res.Requests = len(all)
	res.PerSecond = float64(len(all)) / elapsed.Seconds()
	res.Latency = summarize(all)
	return res
}

// simMember is a member that answers every heartbeat the way the member
// runtime does, enough to keep a steady group steady.
type simMember struct {
	mu                sync.Mutex
	prefix, group, id string
	epoch, version    int64
	owned             []protocol.Shard
	revoking          []protocol.RevokingShard
	seq               int
}

func (m *simMember) beat(ctx context.Context, client *http.Client, server string) (protocol.HeartbeatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	req := protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion, RequestID: fmt.Sprintf("%s-%d", m.id, m.seq),
		MemberID: m.id, MemberName: "bench", MemberEpoch: m.epoch, MetadataVersion: m.version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 4, AvailableConcurrency: 4},
		OwnedShards:             m.owned, RevokingShards: m.revoking, ShardProgress: []protocol.ShardProgress{},
	}
	url := server + protocol.BasePath + "/streams/" + m.prefix + "/groups/" + m.group + "/members/" + m.id + "/heartbeat"
	var resp protocol.HeartbeatResponse
	if err := postJSON(ctx, client, url, req, &resp); err != nil {
		return resp, err
	}
	switch resp.Status {
	case protocol.StatusOK, protocol.StatusSyncMetadata, protocol.StatusRevokePending:
		m.epoch, m.version = resp.MemberEpoch, resp.MetadataVersion
		assigned := map[int]bool{}
		for _, s := range resp.Assignment.AssignedShards {
			assigned[s.ShardIndex] = true
		}
		m.revoking = []protocol.RevokingShard{}
		for _, s := range m.owned {
			if !assigned[s.ShardIndex] {
				m.revoking = append(m.revoking, protocol.RevokingShard{Shard: s, State: protocol.RevokeRevoked})
			}
		}
		if resp.Status == protocol.StatusOK {
			m.owned = resp.Assignment.AssignedShards
		} else {
			kept := []protocol.Shard{}
			for _, s := range m.owned {
				if assigned[s.ShardIndex] {
					kept = append(kept, s)
				}
			}
			m.owned = kept
		}
	case protocol.StatusUnknownMemberID, protocol.StatusFencedMemberEpoch:
		m.epoch, m.version, m.owned, m.revoking = 0, 0, []protocol.Shard{}, []protocol.RevokingShard{}
	}
	return resp, nil
}

func postJSON(ctx context.Context, client *http.Client, url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// settle creates the streams, joins every member and heartbeats until each
// group answers OK with nothing pending to every member.
func settle(ctx context.Context, client *http.Client, cfg HeartbeatConfig) ([]*simMember, error) {
	var members []*simMember
	for g := range cfg.Groups {
		prefix := fmt.Sprintf("bench%d", g)
		if err := CreateStream(ctx, client, cfg.Server, prefix, cfg.Shards); err != nil {
			return nil, err
		}
		for i := range cfg.Members {
			members = append(members, &simMember{prefix: prefix, group: prefix, id: fmt.Sprintf("m%d", i),
				owned: []protocol.Shard{}, revoking: []protocol.RevokingShard{}})
		}
	}
	// Join all, then sweep until a whole sweep is quiet.
	for round := 0; round < 50; round++ {
		quiet := true
		var mu sync.Mutex
		var firstErr error
		sem := make(chan struct{}, cfg.Conns)
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				before := len(m.owned)
				resp, err := m.beat(ctx, client, cfg.Server)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					firstErr = errors.Join(firstErr, err)
					return
				}
				if resp.Status != protocol.StatusOK || len(resp.Assignment.PendingShards) > 0 ||
					len(m.revoking) > 0 || before != len(m.owned) {
					quiet = false
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return nil, fmt.Errorf("settle: %w", firstErr)
		}
		if quiet {
			return members, nil
		}
	}
	return nil, errors.New("settle: groups did not reach a steady state in 50 sweeps")
}

// baseline measures BaselineHandler on a fresh loopback listener with the
// same clients, concurrency and duration as the coordinator phase.
func baseline(ctx context.Context, client *http.Client, cfg HeartbeatConfig) (PhaseResult, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return PhaseResult{}, fmt.Errorf("baseline listen: %w", err)
	}
	srv := &http.Server{Handler: BaselineHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + protocol.BasePath + "/streams/bench/groups/bench/members/m0/heartbeat"
	req := protocol.HeartbeatRequest{
		ProtocolVersion: 1, RequestID: "r", MemberID: "m0", MemberEpoch: 5, MetadataVersion: 5,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 4, AvailableConcurrency: 4},
		OwnedShards:             protocol.Shards([]int{1, 2, 3}), RevokingShards: []protocol.RevokingShard{},
		ShardProgress: []protocol.ShardProgress{},
	}
	return drive(ctx, cfg, func(int, int) (bool, error) {
		var resp protocol.HeartbeatResponse
		if err := postJSON(ctx, client, url, req, &resp); err != nil {
			return false, err
		}
		return resp.Status == protocol.StatusOK, nil
	}), nil
}
