package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// Timings of the member runtime (package member) that the simulated members
// copy: a released shard is reported soonDelay later, a failed heartbeat is
// retried after errBackoffMin at first.
const (
	soonDelay     = 5 * time.Millisecond
	errBackoffMin = 50 * time.Millisecond
)

// ConvergeConfig describes a convergence run: a group of Members members
// reading Shards shards settles, then in every round Join members join and,
// once the group has converged again, Leave members leave.
type ConvergeConfig struct {
	// Server is the coordinator's base URL.
	Server string
	// Credentials authenticate every call; the zero value sends none.
	Credentials coordclient.Credentials `json:"-"`
	// Prefix names the stream (and its default group); it must not exist.
	Prefix string
	// Members is the size of the settled group before each change.
	Members int
	// Shards is the stream's shard count.
	Shards int
	// Join and Leave are the members that join, then leave, per round.
	// At least one of them is positive.
	Join, Leave int
	// Rounds repeats the changes, each after a random pause shorter than
	// the heartbeat interval, so that a change falls anywhere in the
	// members' heartbeat cycle.
	Rounds int
	// Drain is how long a revoked shard takes to drain before the member
	// reports it REVOKED (its read loop's BLOCK and records in flight);
	// zero drains at once.
	Drain time.Duration
	// Timeout bounds one convergence. Default 30s.
	Timeout time.Duration
	// Seed fixes the members' heartbeat phases and the pauses; it is
	// printed in the report.
	Seed uint64
	// NoWait makes the members heartbeat like the reference clients: no
	// waitMs, so a member hears of a change only at its next heartbeat.
	// By default they hold their steady heartbeats (waitMs) and heartbeat
	// again at once after an answer that carried a change, as package
	// member does.
	NoWait bool
}

// ConvergeReport is the outcome of a convergence run.
type ConvergeReport struct {
	Config ConvergeConfig `json:"config"`
	// Joins and Leaves hold one convergence time per round.
	Joins  []time.Duration `json:"joins"`
	Leaves []time.Duration `json:"leaves"`
	// JoinsHeld and LeavesHeld are, per round, until every member was
	// granted its whole target with nothing pending or draining: reads
	// are where they will stay, though the members have not reported so
	// yet (the coordinator learns it one heartbeat interval later).
	JoinsHeld  []time.Duration `json:"joinsHeld"`
	LeavesHeld []time.Duration `json:"leavesHeld"`
	// Interval is the steady heartbeatIntervalMs the coordinator answered,
	// the natural unit of these times.
	Interval time.Duration `json:"interval"`
	// Heartbeats counts every heartbeat sent during the measured changes.
	Heartbeats int `json:"heartbeats"`
	// Checks counts overlap checks (one after every applied answer);
	// Overlaps the checks that found a shard read by two members, or read
	// by one while another still drained it. Anything but 0 is a bug.
	Checks   int      `json:"checks"`
	Overlaps int      `json:"overlaps"`
	Examples []string `json:"examples,omitempty"`
}

// convMember is a simulated member runtime: it heartbeats one request at a
// time, waits the answer's heartbeatIntervalMs (or soonDelay once a
// revoked shard is let go) and applies answers as package member does
// (its rules 4, 5 and 8). Unless NoWait, a steady member (joined, nothing
// revoked) asks the coordinator to hold its answer for the interval
// (waitMs), and heartbeats again at once after an answer that told it
// something new, as package member does.
type convMember struct {
	id             string
	epoch, version int64
	// owned is sorted; draining maps a revoked shard to when it is let go;
	// released are let-go shards reported REVOKED until an answer saw it.
	owned    []int
	draining map[int]time.Time
	released map[int]time.Time
	seq      int
	interval time.Duration
	// wait holds steady heartbeats (waitMs); lastView is what the last
	// answer said (status, epoch, assigned and pending shards).
	wait     bool
	lastView string
	// shorten cuts the next held wait once (the member's phase).
	shorten time.Duration
	// quiet: the last answer, held or not, told the member nothing new,
	// so what it confirms was true when its request reached the
	// coordinator, not only when it came back.
	quiet bool
	// settledAt and heldAt are when settled and held last became true.
	settledAt, heldAt time.Time
	// settled: the last answer, to a request sent after the change was
	// known, was OK with nothing pending, and the member already reported
	// exactly what it was granted.
	settled bool
	// held: the last answer, to a request sent after the change was known,
	// was OK with nothing pending, and nothing drains.
	held bool
	left bool
	// skew delays the next heartbeat once: it gives the settled members
	// random phases, as in a group whose members joined at various times.
	skew time.Duration
}

// convWorld holds every member's view under one lock, so that each applied
// answer is checked against a consistent picture of who reads what.
type convWorld struct {
	mu       sync.Mutex
	members  []*convMember
	rep      *ConvergeReport
	changeAt time.Time // answers to requests sent before it do not settle
	// done is closed when every live member is settled after a change.
	done     chan struct{}
	doneAt   time.Time
	heldAt   time.Time
	counting bool
}

// RunConverge runs cfg's rounds and reports each convergence time.
func RunConverge(ctx context.Context, cfg ConvergeConfig) (ConvergeReport, error) {
	if cfg.Members <= 0 || cfg.Shards <= 0 || (cfg.Join <= 0 && cfg.Leave <= 0) || cfg.Leave > cfg.Members {
		return ConvergeReport{}, fmt.Errorf("converge: need members, shards, and join or leave ≤ members: %+v", cfg)
	}
	cfg.Rounds = max(cfg.Rounds, 1)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "converge"
	}
	rep := ConvergeReport{Config: cfg}
	client, err := newClient(cfg.Server, cfg.Credentials, cfg.Members+cfg.Join*cfg.Rounds+4)
	if err != nil {
		return rep, err
	}
	defer client.CloseIdleConnections()
	if err := CreateStream(ctx, client, cfg.Prefix, cfg.Shards); err != nil {
		return rep, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	w := &convWorld{rep: &rep}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var runErr error
	start := func(m *convMember, phase time.Duration) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.loop(ctx, client, cfg, m, phase); err != nil && ctx.Err() == nil {
				errMu.Lock()
				runErr = errors.Join(runErr, err)
				errMu.Unlock()
				cancel()
			}
		}()
	}
	stopAll := func() error {
		cancel()
		wg.Wait()
		errMu.Lock()
		defer errMu.Unlock()
		return runErr
	}
	next := 0
	newMember := func() *convMember {
		m := &convMember{id: fmt.Sprintf("m%03d", next), owned: []int{}, draining: map[int]time.Time{},
			released: map[int]time.Time{}, wait: !cfg.NoWait}
		next++
		return m
	}
	// Settle: every member joins at once, then keeps a random phase of the
	// default interval, as members of a long-running group do.
	w.change(time.Now(), false)
	for range cfg.Members {
		m := newMember()
		w.add(m)
		start(m, 0)
	}
	if _, _, err := w.wait(ctx, cfg.Timeout); err != nil {
		return rep, errors.Join(fmt.Errorf("converge: settle: %w", err), stopAll())
	}
	w.mu.Lock()
	rep.Interval = w.members[0].interval
	for _, m := range w.members {
		m.skew = time.Duration(rng.Int64N(int64(max(rep.Interval, time.Millisecond))))
	}
	w.mu.Unlock()
	pause := func() { sleepCtx(ctx, time.Duration(rng.Int64N(int64(max(rep.Interval, time.Millisecond))))) }
	for range cfg.Rounds {
		if cfg.Join > 0 {
			pause()
			at := time.Now()
			w.change(at, true)
			for range cfg.Join {
				m := newMember()
				w.add(m)
				start(m, 0)
			}
			d, h, err := w.wait(ctx, cfg.Timeout)
			if err != nil {
				return rep, errors.Join(fmt.Errorf("converge: join: %w", err), stopAll())
			}
			rep.Joins, rep.JoinsHeld = append(rep.Joins, d), append(rep.JoinsHeld, h)
		}
		if cfg.Leave > 0 {
			pause()
			at := time.Now()
			w.change(at, true)
			for range cfg.Leave {
				if err := w.leave(ctx, client, cfg, rng); err != nil {
					return rep, errors.Join(fmt.Errorf("converge: leave: %w", err), stopAll())
				}
			}
			d, h, err := w.wait(ctx, cfg.Timeout)
			if err != nil {
				return rep, errors.Join(fmt.Errorf("converge: leave: %w", err), stopAll())
			}
			rep.Leaves, rep.LeavesHeld = append(rep.Leaves, d), append(rep.LeavesHeld, h)
		}
	}
	return rep, stopAll()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// change starts a measured change at at: from now on only answers to
// requests sent after at settle a member.
func (w *convWorld) change(at time.Time, counting bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changeAt, w.done, w.counting, w.heldAt = at, make(chan struct{}), counting, time.Time{}
	for _, m := range w.members {
		m.settled, m.held = false, false
	}
}

func (w *convWorld) add(m *convMember) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.members = append(w.members, m)
}

// wait blocks until the change has converged and returns how long it took,
// until settled and until held.
func (w *convWorld) wait(ctx context.Context, timeout time.Duration) (time.Duration, time.Duration, error) {
	w.mu.Lock()
	done, at := w.done, w.changeAt
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.doneAt.Sub(at), w.heldAt.Sub(at), nil
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-t.C:
		w.mu.Lock()
		defer w.mu.Unlock()
		return 0, 0, fmt.Errorf("not converged after %v:%s", timeout, w.describe())
	}
}

func (w *convWorld) describe() string {
	out := ""
	for _, m := range w.members {
		if !m.left {
			out += fmt.Sprintf("\n  %s epoch=%d owned=%d draining=%d released=%d settled=%v",
				m.id, m.epoch, len(m.owned), len(m.draining), len(m.released), m.settled)
		}
	}
	return out
}

// loop is one member's heartbeat loop: the first heartbeat after phase.
func (w *convWorld) loop(ctx context.Context, client *coordclient.Client, cfg ConvergeConfig, m *convMember, phase time.Duration) error {
	due := time.Now().Add(phase)
	for {
		sleepCtx(ctx, time.Until(due))
		w.mu.Lock()
		skew := m.skew
		m.skew = 0
		if m.wait {
			// A holding member is parked at the coordinator whatever its
			// phase: the skew shortens one held wait instead.
			m.shorten, skew = skew, 0
		}
		w.mu.Unlock()
		sleepCtx(ctx, skew)
		if ctx.Err() != nil {
			return nil
		}
		w.mu.Lock()
		if m.left {
			w.mu.Unlock()
			return nil
		}
		req := m.request(time.Now())
		w.mu.Unlock()
		sentAt := time.Now()
		resp, err := client.Heartbeat(ctx, cfg.Prefix, cfg.Prefix, &req)
		w.mu.Lock()
		if w.counting {
			w.rep.Heartbeats++
		}
		if err == nil && resp.ResponseTo != req.RequestID {
			err = fmt.Errorf("answer to %q for request %q", resp.ResponseTo, req.RequestID)
		}
		if err != nil {
			w.mu.Unlock()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("heartbeat of %s: %w", m.id, err)
		}
		if m.left { // left while this heartbeat was in flight
			w.mu.Unlock()
			return nil
		}
		now := time.Now()
		due = m.apply(req, resp, sentAt, now, cfg.Drain)
		held := !sentAt.Before(w.changeAt) && resp.Status == protocol.StatusOK &&
			len(resp.Assignment.PendingShards) == 0 && len(m.draining) == 0
		settled := held && len(m.released) == 0 && slices.Equal(protocol.Indexes(req.OwnedShards), m.owned)
		// A held answer comes back up to waitMs late; when it says
		// nothing new, the report it confirms reached the coordinator
		// when it was sent (the grant came with an earlier answer).
		at := now
		if m.quiet {
			at = sentAt
		}
		if held && !m.held {
			m.heldAt = at
		}
		if settled && !m.settled {
			m.settledAt = at
		}
		m.held, m.settled = held, settled
		w.check()
		w.mu.Unlock()
	}
}

// check records an overlap if any shard is read (owned or still draining)
// by two members, and closes done once every live member is settled.
// Caller holds w.mu.
func (w *convWorld) check() {
	w.rep.Checks++
	holder := map[int]string{}
	all, held := true, true
	var settledAt, heldAt time.Time
	for _, m := range w.members {
		if m.left {
			continue
		}
		all, held = all && m.settled, held && m.held
		if m.settledAt.After(settledAt) {
			settledAt = m.settledAt
		}
		if m.heldAt.After(heldAt) {
			heldAt = m.heldAt
		}
		for _, s := range m.owned {
			w.claim(holder, s, m.id)
		}
		for s := range m.draining {
			w.claim(holder, s, m.id)
		}
	}
	if held && w.heldAt.IsZero() {
		w.heldAt = heldAt
	}
	if all && w.done != nil {
		select {
		case <-w.done:
		default:
			w.doneAt = settledAt
			close(w.done)
		}
	}
}

func (w *convWorld) claim(holder map[int]string, s int, id string) {
	if other, ok := holder[s]; ok && other != id {
		w.rep.Overlaps++
		if len(w.rep.Examples) < 5 {
			w.rep.Examples = append(w.rep.Examples, fmt.Sprintf("shard %d read by %s and %s", s, other, id))
		}
	}
	holder[s] = id
}

// leave makes one random live member leave gracefully (package member's
// rule 13): reads stop, shards drain, then one heartbeat with epoch -1
// reporting every shard REVOKED.
func (w *convWorld) leave(ctx context.Context, client *coordclient.Client, cfg ConvergeConfig, rng *rand.Rand) error {
	w.mu.Lock()
	var live []*convMember
	for _, m := range w.members {
		if !m.left {
			live = append(live, m)
		}
	}
	if len(live) == 0 {
		w.mu.Unlock()
		return errors.New("no member left to leave")
	}
	m := live[rng.IntN(len(live))]
	m.left = true // its loop stops; it reads nothing from now on
	shards := slices.Concat(m.owned, slices.Collect(mapKeys(m.draining)), slices.Collect(mapKeys(m.released)))
	slices.Sort(shards)
	shards = slices.Compact(shards)
	m.owned, m.draining, m.released = []int{}, map[int]time.Time{}, map[int]time.Time{}
	m.seq++
	req := protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion, RequestID: fmt.Sprintf("%s-leave-%d", m.id, m.seq),
		MemberID: m.id, MemberName: "bench", MemberEpoch: protocol.EpochLeave, MetadataVersion: m.version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 2, AvailableConcurrency: 2},
		OwnedShards:             []protocol.Shard{}, RevokingShards: revokedReport(shards, time.Now().UTC()),
		ShardProgress: []protocol.ShardProgress{},
	}
	w.check() // without the leaver, the others may already be settled
	w.mu.Unlock()
	sleepCtx(ctx, cfg.Drain)
	resp, err := client.Heartbeat(ctx, cfg.Prefix, cfg.Prefix, &req)
	if err != nil {
		return err
	}
	if resp.Status != protocol.StatusOK {
		return fmt.Errorf("leave of %s answered %s", m.id, resp.Status)
	}
	return nil
}

func revokedReport(shards []int, at time.Time) []protocol.RevokingShard {
	out := make([]protocol.RevokingShard, len(shards))
	for i, s := range shards {
		out[i] = protocol.RevokingShard{Shard: protocol.Shard{ShardIndex: s}, State: protocol.RevokeRevoked, AckedAt: &at}
	}
	return out
}

func mapKeys[V any](m map[int]V) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// request is the heartbeat the member sends at now; shards whose drain
// ended by now are let go first.
func (m *convMember) request(now time.Time) protocol.HeartbeatRequest {
	for s, at := range m.draining {
		if !at.After(now) {
			delete(m.draining, s)
			m.released[s] = at
		}
	}
	m.seq++
	revoking := []protocol.RevokingShard{}
	for _, s := range slices.Sorted(mapKeys(m.draining)) {
		revoking = append(revoking, protocol.RevokingShard{Shard: protocol.Shard{ShardIndex: s},
			State: protocol.RevokeDraining, InFlight: 1})
	}
	for _, s := range slices.Sorted(mapKeys(m.released)) {
		at := m.released[s].UTC()
		revoking = append(revoking, protocol.RevokingShard{Shard: protocol.Shard{ShardIndex: s},
			State: protocol.RevokeRevoked, AckedAt: &at})
	}
	slices.SortFunc(revoking, func(a, b protocol.RevokingShard) int { return a.Shard.ShardIndex - b.Shard.ShardIndex })
	var waitMs int64
	if m.wait && m.epoch > 0 && len(revoking) == 0 && m.interval > 0 {
		// Only a steady member is held: reports the coordinator waits
		// for are never held behind an answer.
		waitMs = max((m.interval - m.shorten).Milliseconds(), 1)
	}
	m.shorten = 0
	return protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion, RequestID: fmt.Sprintf("%s-%d", m.id, m.seq), WaitMs: waitMs,
		MemberID: m.id, MemberName: "bench", MemberEpoch: m.epoch, MetadataVersion: m.version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 2, AvailableConcurrency: 2},
		OwnedShards:             protocol.Shards(m.owned), RevokingShards: revoking,
		ShardProgress: []protocol.ShardProgress{},
	}
}

// apply applies resp (the answer to req, sent at sentAt and received at
// now) and returns when the next heartbeat is due.
func (m *convMember) apply(req protocol.HeartbeatRequest, resp protocol.HeartbeatResponse, sentAt, now time.Time, drain time.Duration) time.Time {
	interval := protocol.DefaultHeartbeatInterval
	if resp.HeartbeatIntervalMs > 0 {
		interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
	}
	m.interval = interval
	m.quiet = false
	assigned := protocol.Indexes(resp.Assignment.AssignedShards)
	slices.Sort(assigned)
	assigned = slices.Compact(assigned)
	var lost []int
	switch resp.Status {
	case protocol.StatusOK, protocol.StatusSyncMetadata, protocol.StatusRevokePending:
		if resp.MemberEpoch > 0 {
			m.epoch = resp.MemberEpoch
		}
		if resp.MetadataVersion >= 0 {
			m.version = resp.MetadataVersion
		}
		// Reports the coordinator has now seen are dropped.
		for _, r := range req.RevokingShards {
			if r.Terminal() {
				delete(m.released, r.Shard.ShardIndex)
			}
		}
		kept := []int{}
		for _, s := range m.owned {
			if _, ok := slices.BinarySearch(assigned, s); ok {
				kept = append(kept, s)
			} else {
				lost = append(lost, s)
			}
		}
		if resp.Status == protocol.StatusOK {
			// A shard given back while still revoked is owned again
			// once let go; the simulation lets it go at once.
			for _, s := range assigned {
				delete(m.draining, s)
				delete(m.released, s)
			}
			m.owned = assigned
		} else {
			m.owned = kept
		}
	case protocol.StatusUnknownMemberID, protocol.StatusFencedMemberEpoch:
		// Rule 8: everything stops at once, rejoin at once.
		m.epoch, m.version = protocol.EpochJoin, 0
		m.owned, m.draining, m.released = []int{}, map[int]time.Time{}, map[int]time.Time{}
		return now
	case protocol.StatusRetry:
		return now.Add(interval)
	default:
		return now.Add(interval)
	}
	due := now.Add(interval)
	if m.wait {
		// An answer that differs from the last one carried a change: the
		// next heartbeat follows at once; a held one counts its wait.
		view := fmt.Sprint(resp.Status, resp.MemberEpoch, assigned, protocol.Indexes(resp.Assignment.PendingShards))
		m.quiet = view == m.lastView
		switch {
		case view != m.lastView:
			due = now
		case req.WaitMs > 0 || (m.epoch > 0 && len(m.draining) == 0 && len(m.released) == 0):
			// Nothing new, and this heartbeat was held or the next one
			// will be: the next follows once the wait asked for is over
			// (at once after a held one, or after an unheld report), so
			// that a steady member stays parked at the coordinator even
			// when the answer brings a longer interval.
			due = sentAt.Add(time.Duration(req.WaitMs) * time.Millisecond)
		}
		m.lastView = view
	}
	for _, s := range lost {
		m.draining[s] = now.Add(drain)
	}
	for _, at := range m.draining {
		due = minTime(due, at.Add(soonDelay))
	}
	if len(m.draining) > 0 && drain == 0 {
		// Instant drain: let go now, report soon.
		for s, at := range m.draining {
			delete(m.draining, s)
			m.released[s] = at
		}
	}
	return due
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
