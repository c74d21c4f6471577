package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// heldMember is a simulated member runtime holding its steady heartbeats.
type heldMember struct {
	// client is the member's wire layer: its runtime's, shared with the
	// other members of its "pod" over HTTP/2.
	client     *coordclient.Client
	prefix, id string
	simState
	lastView string
	// caughtUp: the heartbeat in flight was sent at once to catch up
	// after a held request answered early because it was behind.
	caughtUp bool
	// wasHeld: the member has sent a held heartbeat.
	wasHeld bool
}

// steady is package member's rule for asking a held answer: joined and
// nothing being revoked.
func (m *heldMember) steady() bool { return m.epoch > 0 && len(m.revoking) == 0 }

func (m *heldMember) request(waitMs int64) protocol.HeartbeatRequest {
	req := m.next(m.id)
	req.WaitMs = waitMs
	return req
}

// apply takes an answer as package member does, draining a revoked shard
// at once, and says whether it told the member anything new.
func (m *heldMember) apply(resp protocol.HeartbeatResponse) (changed bool) {
	m.take(resp)
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

// heldRun is the shared state of one process's members (the held ones,
// or the churn): their requests in flight and what they timed during
// the measured phase.
type heldRun struct {
	interval time.Duration
	inFlight atomic.Int64 // held requests in flight
	// membersHeld counts the members that have sent a held heartbeat.
	membersHeld atomic.Int64

	mu                sync.Mutex
	measuring         bool
	since             time.Time
	answers           HeldAnswers
	notHeld, heldTook []time.Duration
}

// record runs f under the lock while the phase is measured.
func (r *heldRun) record(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.measuring {
		f()
	}
}

// startCounting begins the measured phase.
func (r *heldRun) startCounting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.measuring, r.since = true, time.Now()
	r.answers, r.notHeld, r.heldTook = HeldAnswers{}, nil, nil
}

// stopCounting ends the measured phase and sums it up.
func (r *heldRun) stopCounting() HeldAnswers {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.measuring {
		return r.answers
	}
	r.measuring = false
	a := r.answers
	a.Measured = time.Since(r.since)
	a.NotHeld, a.NotHeldTook = len(r.notHeld), summarize(r.notHeld)
	a.HeldTook = summarize(r.heldTook)
	a.Answered = len(r.notHeld) + len(r.heldTook)
	r.answers = a
	return a
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
		if !m.wasHeld {
			m.wasHeld = true
			r.membersHeld.Add(1)
		}
	}
	start := time.Now()
	resp, err = m.client.Heartbeat(ctx, m.prefix, m.prefix, &req)
	took = time.Since(start)
	if ctx.Err() != nil {
		return resp, wait > 0, took, ctx.Err()
	}
	r.record(func() {
		a := &r.answers
		switch {
		case err != nil:
			a.Errors++
		case resp.Status != protocol.StatusOK:
			a.NotOK++
			if a.NotOKByStatus == nil {
				a.NotOKByStatus = map[string]int{}
			}
			a.NotOKByStatus[strings.TrimSuffix(string(resp.Status)+" "+string(resp.ErrorCode), " ")]++
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
func (r *heldRun) loop(ctx context.Context, m *heldMember) {
	for ctx.Err() == nil {
		epoch, version := m.epoch, m.version
		resp, held, took, err := r.beat(ctx, m)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// Counted in Errors; the member tries again after a pause, as
			// the member runtime does (a keep-alive connection the server
			// closed as the request left, a refused dial at a full
			// accept queue).
			select {
			case <-ctx.Done():
				return
			case <-time.After(errBackoffMin):
			}
			continue
		}
		changed := m.apply(resp)
		if held {
			r.record(func() {
				r.answers.Held++
				switch {
				case changed && took < r.interval-heldEarlyMargin:
					// Released before its wait was over: a change of its
					// shards or status. News that came with an answer at
					// the end of its wait (a new epoch) is not early.
					r.answers.Early++
				case took < 50*time.Millisecond:
					r.answers.AtOnce++
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
				return
			case <-time.After(next):
			}
		}
	}
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

// simState is what a simulated member carries from one answer to its
// next heartbeat, as package member does: its epoch and metadata version,
// the shards it reads and those it reports revoked (a simulated member
// drains a revoked shard at once).
type simState struct {
	epoch, version int64
	owned          []protocol.Shard
	revoking       []protocol.RevokingShard
	seq            int
}

// newSimState is a member about to join: it owns and revokes nothing
// (empty lists, not absent ones, as package member sends them).
func newSimState() simState {
	return simState{owned: []protocol.Shard{}, revoking: []protocol.RevokingShard{}}
}

// next is the member's next heartbeat.
func (s *simState) next(id string) protocol.HeartbeatRequest {
	s.seq++
	return protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion, RequestID: fmt.Sprintf("%s-%d", id, s.seq),
		MemberID: id, MemberName: "bench", MemberEpoch: s.epoch, MetadataVersion: s.version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 4, AvailableConcurrency: 4},
		OwnedShards:             s.owned, RevokingShards: s.revoking, ShardProgress: []protocol.ShardProgress{},
	}
}

// take applies an answer: an assignment is taken (OK: all of it; SYNC_METADATA
// and REVOKE_PENDING: only what the member already reads), a shard no longer
// assigned is reported revoked, and an unknown or fenced member starts over.
func (s *simState) take(resp protocol.HeartbeatResponse) {
	switch resp.Status {
	case protocol.StatusOK, protocol.StatusSyncMetadata, protocol.StatusRevokePending:
		s.epoch, s.version = resp.MemberEpoch, resp.MetadataVersion
		assigned := map[int]bool{}
		for _, sh := range resp.Assignment.AssignedShards {
			assigned[sh.ShardIndex] = true
		}
		s.revoking = []protocol.RevokingShard{}
		kept := []protocol.Shard{}
		for _, sh := range s.owned {
			if assigned[sh.ShardIndex] {
				kept = append(kept, sh)
			} else {
				s.revoking = append(s.revoking, protocol.RevokingShard{Shard: sh, State: protocol.RevokeRevoked})
			}
		}
		s.owned = kept
		if resp.Status == protocol.StatusOK {
			s.owned = resp.Assignment.AssignedShards
		}
	case protocol.StatusUnknownMemberID, protocol.StatusFencedMemberEpoch:
		s.epoch, s.version, s.owned, s.revoking = 0, 0, []protocol.Shard{}, []protocol.RevokingShard{}
	}
}
