package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// Timing of the heartbeat loop that is not taken from the coordinator.
const (
	// errBackoffMin and errBackoffMax bound the wait before retrying a
	// heartbeat that failed (network error, non-200 answer); the lease
	// keeps running meanwhile.
	errBackoffMin = 100 * time.Millisecond
	errBackoffMax = time.Second
	// soonDelay coalesces the heartbeats asked for by several shards
	// released at about the same time.
	soonDelay = 5 * time.Millisecond
)

// beat sends a heartbeat now, or right after the one in flight (rule 2).
//
// A join (epoch 0) of a member that was reading waits until every read
// loop has returned (rule 8): the join tells the coordinator the member
// owns nothing, and it may grant the shards to another member at once
// (docs/protocol.md §9.1), while a blocking XREADGROUP issued before the
// fence would still take that shard's new records into this consumer's
// pending list. The wait is short: the shard actors interrupt blocking
// reads (readConn); only without a read connection is it up to one read,
// WithBlock or the lease left when it was issued, whichever is shorter.
func (a *memberActor) beat() {
	if a.stopped || a.done || a.leaveSent || a.redisDown {
		return
	}
	if a.hbBusy {
		a.beatAgain = true
		return
	}
	if wait := a.rejoinAt - a.core.lease.now(); a.epoch == protocol.EpochJoin && wait > 0 {
		stopTimer(&a.beatTimer)
		a.after(wait)
		return
	}
	if a.epoch == protocol.EpochJoin && a.reading() {
		if !a.rejoinWait {
			a.log.Debug("rejoin waits for the read loops to return", slog.Int("runs", len(a.runs)))
		}
		a.rejoinWait = true
		stopTimer(&a.beatTimer)
		return
	}
	stopTimer(&a.beatTimer)
	a.send(a.request(), false)
}

// beatSoon heartbeats after soonDelay: something the coordinator is
// waiting for (a released shard) is ready to report. A held heartbeat in
// flight is cancelled so that the report does not wait for its answer (the
// coordinator recorded it on arrival; only its answer is lost).
func (a *memberActor) beatSoon() {
	if a.hbBusy {
		a.beatAgain = true
		if a.hbHeld && a.hbReqCancel != nil {
			a.hbReqCancel()
		}
		return
	}
	a.after(soonDelay)
}

// after schedules the next heartbeat in d, unless one is already due
// sooner (a released shard asked for a heartbeat while an answer was being
// applied: the interval of that answer must not delay it).
func (a *memberActor) after(d time.Duration) {
	if a.stopped || a.done || a.leaveSent {
		return
	}
	now := a.core.lease.now()
	due := now + max(d, 0)
	if a.beatTimer != nil && a.beatDue > now && a.beatDue <= due {
		return
	}
	stopTimer(&a.beatTimer)
	a.beatDue = due
	a.beatTimer = a.timer(d, &beatMsg{})
}

// timer delivers msg to the actor after d.
func (a *memberActor) timer(d time.Duration, msg any) *time.Timer {
	root, self := a.rs.system.Root, a.self
	return time.AfterFunc(max(d, 0), func() { root.Send(self, msg) })
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// request builds the next heartbeat from the member's state.
func (a *memberActor) request() protocol.HeartbeatRequest {
	a.inc.seq++
	cfg := a.rs.cfg
	requestID := a.id + "-" + a.rs.nonce + "-" + strconv.FormatInt(a.inc.seq, 10)
	if a.retryID != "" {
		requestID, a.retryID = a.retryID, ""
	}
	progress := []protocol.ShardProgress{}
	for _, s := range a.owned {
		// Only owned shards: progress on any other shard is outside the
		// member's authority and gets it fenced (docs/protocol.md §6.1 step 6).
		if run := a.runs[s]; run != nil {
			progress = append(progress, run.progress())
		}
	}
	return protocol.HeartbeatRequest{
		ProtocolVersion: protocol.CurrentVersion,
		RequestID:       requestID,
		InstanceID:      a.rs.instanceID,
		RequestSeq:      a.rs.requestSeq.Add(1),
		WaitMs:          a.waitMs(),
		MemberID:        a.id,
		MemberName:      cfg.memberName,
		MemberEpoch:     a.epoch,
		MetadataVersion: a.version,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{
			RuntimeMaxConcurrency: cfg.maxWorkers,
			AvailableConcurrency:  max(a.core.sched.available(), 0),
		},
		OwnedShards:    protocol.Shards(a.owned),
		RevokingShards: a.revokingReport(),
		ShardProgress:  progress,
	}
}

// waitMs is how long the coordinator may hold the next answer
// (docs/protocol.md, held heartbeats): the heartbeat interval, but only for
// a steady member — joined, not leaving, nothing being revoked, lease not
// suspended — so that reports the coordinator waits for are never held
// behind an answer, and 0 otherwise. A coordinator that ignores it answers
// at once, and the member then waits the interval itself.
func (a *memberActor) waitMs() int64 {
	// After a RETRY the lease was not renewed: the answer of a coordinator
	// that decides again (the new owner after a failover) must come at
	// once, not a wait later with the lease running out.
	if a.epoch <= 0 || a.leaving || a.suspended || len(a.revoking) > 0 || a.failures > 0 || a.retries > 0 {
		return 0
	}
	return holdFor(a.interval, a.core.lease.until(), a.rs.client.HedgeBound()).Milliseconds()
}

// holdFor is the hold a steady member asks for: the interval, but short
// enough that the lease left still has room for two replicas. The client
// sends a heartbeat held past its wait plus the hedge bound to another
// replica too (coordclient.Client.Heartbeat), and that copy needs a bound
// of its own to be answered before the lease ends. 0 when there is no
// such room: the heartbeat is not held.
func holdFor(interval, leaseLeft, bound time.Duration) time.Duration {
	return max(min(interval, leaseLeft-2*bound), 0)
}

// send posts req on a goroutine owned by the actor (waited for in
// shutdown); the answer comes back as an answerMsg.
func (a *memberActor) send(req protocol.HeartbeatRequest, leave bool) {
	a.hbBusy = true
	sentAt, sentWall := a.core.lease.stamp()
	timeout := a.rs.requestTimeout
	if leave {
		timeout = max(min(timeout, a.leaveAt-sentAt), 200*time.Millisecond)
	}
	// A held answer may come waitMs late: the bound covers that too.
	timeout += time.Duration(req.WaitMs) * time.Millisecond
	root, self, client, core := a.rs.system.Root, a.self, a.rs.client, a.core
	prefix, group := a.rs.cfg.stream, a.rs.cfg.group
	ctx, cancel := context.WithTimeout(a.hbCtx, timeout)
	a.hbHeld, a.hbReqCancel = req.WaitMs > 0, cancel
	a.hbWG.Add(1)
	go func() {
		defer a.hbWG.Done()
		resp, err := client.Heartbeat(ctx, prefix, group, &req)
		if err != nil {
			err = fmt.Errorf("heartbeat %s: %w", req.MemberID, err)
		}
		cancel()
		root.Send(self, &answerMsg{core: core, req: req, resp: resp, err: err, sentAt: sentAt, sentWall: sentWall, leave: leave})
	}()
}

// onAnswer applies one heartbeat answer (docs/protocol.md §6's status table).
func (a *memberActor) onAnswer(m *answerMsg) {
	if m.core != a.core {
		return // sent by an earlier incarnation of this actor
	}
	a.hbBusy, a.hbHeld, a.hbReqCancel = false, false, nil
	if a.stopped {
		return
	}
	if m.leave {
		a.onLeaveAnswer(m)
		return
	}
	defer a.afterAnswer()
	if m.err != nil && m.req.WaitMs > 0 && errors.Is(m.err, context.Canceled) && a.hbCtx.Err() == nil {
		// A held heartbeat cancelled because something must be reported
		// now (beatSoon): the coordinator recorded it; beatAgain sends
		// the report. Not a failure.
		return
	}
	a.heartbeatHook(m)
	if err := checkAnswer(m); err != nil {
		if aerr := authError(a.rs.cfg.stream, a.rs.cfg.group, m.err); aerr != nil {
			a.fail(aerr)
			return
		}
		var coordErr *coordclient.Error
		if m.err != nil && !errors.As(m.err, &coordErr) {
			// The request may have reached the coordinator and only its
			// answer been lost: the retry carries the same requestId.
			a.retryID = m.req.RequestID
		}
		a.failures++
		a.errBackoff = min(max(a.errBackoff*2, errBackoffMin), errBackoffMax, a.interval)
		a.reason = "heartbeat failed: " + err.Error()
		if a.failures == 1 || a.failures%10 == 0 {
			a.log.Warn("heartbeat failed; retrying (the lease keeps running)", slog.Int("failures", a.failures),
				slog.Duration("leaseLeft", a.core.lease.until()), slog.Any("error", err))
		}
		a.after(jitter(a.errBackoff))
		return
	}
	if a.failures > 0 {
		a.log.Info("heartbeats recovered", slog.Int("failures", a.failures))
	}
	a.failures, a.errBackoff = 0, 0
	resp := m.resp
	a.takeLease(resp)
	a.takeTiming(resp)
	view := answerView(resp)
	news := view != a.lastView
	a.lastView = view
	assigned := sanitizeShards(resp.Assignment.AssignedShards)
	p := planFor(resp.Status, a.owned, assigned)
	cfg := a.rs.cfg
	switch {
	case p.Fatal:
		a.fail(&ProtocolError{Stream: cfg.stream, Group: cfg.group, MemberID: a.id, Status: string(resp.Status),
			Version: protocol.CurrentVersion, Message: resp.Message})
		return
	case p.Rejoin && resp.ErrorCode == protocol.CodeStreamNotFound:
		// Told apart from an unknown member by the coordinator: a
		// rejoin can never succeed.
		a.fail(&StreamNotFoundError{Stream: cfg.stream, Group: cfg.group, Message: resp.Message})
		return
	case p.Rejoin && resp.ErrorCode == protocol.CodeGroupNotFound:
		a.fail(&GroupNotFoundError{Stream: cfg.stream, Group: cfg.group, Message: resp.Message})
		return
	case p.Rejoin:
		a.rejoin(resp.Status)
		return
	case !p.Known:
		a.log.Warn("unknown heartbeat status; treated as RETRY", slog.String("status", string(resp.Status)))
		a.after(jitter(a.interval))
		return
	case !p.Renew: // RETRY
		a.onRetry(resp, m.req.WaitMs > 0)
		return
	}
	a.rejoins, a.retries, a.reason = 0, 0, ""
	a.lastOK = time.Now()
	// Ignore epochs that are not positive (rule 3): only a leave answers
	// -1, and sending one back would be read as a leave (franz-go's
	// handleResp does the same).
	if resp.MemberEpoch > 0 {
		a.epoch = resp.MemberEpoch
	} else {
		a.log.Warn("ignoring a non-positive member epoch in the answer", slog.Int64("epoch", resp.MemberEpoch))
	}
	if resp.MetadataVersion >= 0 {
		a.version = resp.MetadataVersion
	}
	if !a.suspended && a.core.lease.lapsed() {
		// Rule 9: the lease ended before this answer renews it (the
		// answer came or was applied late; the wall clock stepped
		// forward), and reads, hand-overs and ACKs were refused
		// meanwhile, leaving their records in this consumer's pending
		// list. A lapse the lease check has not seen yet is still a
		// lapse: stop every run now; an OK resumes at once (apply) with
		// new runs, which read the member's own pending entries first
		// (rule 7) instead of leaving them to XAUTOCLAIM.
		a.suspend("assignment lease lapsed before an answer renewed it: reads and ACKs stopped on every shard until an OK")
	}
	a.scheduleLease(a.core.lease.renew(m.sentAt, m.sentWall))
	a.forgetReported(m.req)
	if resp.Status == protocol.StatusOK {
		clear(a.ownerEpochs)
		for _, s := range resp.Assignment.AssignedShards {
			if s.OwnerEpoch > 0 {
				a.ownerEpochs[s.ShardIndex] = s.OwnerEpoch
			}
		}
	}
	if !a.leaving {
		a.apply(resp.Status, p, m.sentAt)
	}
	// When to heartbeat next (nextBeat): at once only for news to act on
	// or report, or to be parked again; a new epoch alone waits.
	next, catchUp := nextBeat(answerFacts{
		News: news || len(p.Start) > 0 || len(p.Revoke) > 0, Asked: time.Duration(m.req.WaitMs) * time.Millisecond,
		Took: a.core.lease.now() - m.sentAt, Behind: resp.MemberEpoch != m.req.MemberEpoch || resp.MetadataVersion != m.req.MetadataVersion,
		CaughtUp: a.catchingUp, Steady: a.waitMs() > 0, Interval: a.interval,
	})
	a.catchingUp = catchUp
	a.after(next)
}

// heartbeatHook tells OnHeartbeat how a heartbeat went.
func (a *memberActor) heartbeatHook(m *answerMsg) {
	e := HeartbeatEvent{MemberID: a.id, Latency: a.core.lease.now() - m.sentAt, Err: checkAnswer(m)}
	if e.Err == nil {
		e.Status, e.ErrorCode, e.Epoch = string(m.resp.Status), string(m.resp.ErrorCode), m.resp.MemberEpoch
		e.Assigned = sanitizeShards(m.resp.Assignment.AssignedShards)
		e.Pending = sanitizeShards(m.resp.Assignment.PendingShards)
	}
	a.rs.hooks.heartbeat(a.core.ctx, e)
}

// onRetry handles a RETRY: keep everything, heartbeat again after
// retryWait (plus jitter, so that members refused together do not come
// back together). It may heal, so it is a WARN with the reason, not
// an error: another live process holding the member id, a full group, or
// a coordinator that cannot decide now (store down, shutting down,
// overloaded). held says the request asked to be held (waitMs).
func (a *memberActor) onRetry(resp protocol.HeartbeatResponse, held bool) {
	a.retries++
	var reason string
	switch {
	case resp.ErrorCode == protocol.CodeMemberIDInUse:
		reason = "another process is using this member id (check WithBaseID / POD_NAME): " + resp.Message
	case resp.ErrorCode == "" && held:
		// The coordinator answers a held heartbeat RETRY when a newer
		// heartbeat of the same member id arrives: the live holder of an
		// id a second process also uses sees it at each of the other's
		// heartbeats. It also lets held answers go when it cannot keep
		// them (a failed write, a restart).
		reason = "a held heartbeat was let go: the coordinator got a newer heartbeat under this member id " +
			"(another process using it? check WithBaseID / POD_NAME) or could not keep held answers"
	case resp.ErrorCode == "":
		reason = "the coordinator cannot decide now (store unavailable, shutting down or overloaded)"
	default:
		reason = string(resp.ErrorCode) + ": " + resp.Message
	}
	a.reason = "coordinator answered RETRY: " + reason
	if a.retries == 1 || a.retries%10 == 0 {
		a.log.Warn("coordinator answered RETRY; heartbeating again", slog.String("reason", reason),
			slog.String("errorCode", string(resp.ErrorCode)), slog.Int("retries", a.retries),
			slog.Duration("leaseLeft", a.core.lease.until()))
	} else {
		a.log.Debug("coordinator answered RETRY", slog.String("reason", reason))
	}
	a.after(jitter(retryWait(resp.ErrorCode, a.retries, a.interval)))
}

// retryWait is how long the member waits after its retries-th RETRY in a
// row. A RETRY that says another replica may serve (REPLICA_NOT_OWNER and
// the like: the stream is moving, or this replica lost its etcd lease) has
// already moved the client to another URL, and the new owner answers as
// soon as it has loaded the stream: the member asks again soon, backing
// off from errBackoffMin to errBackoffMax, at most the interval, so that
// its lease is renewed within the take-over. Any other RETRY waits the
// interval: the coordinator decided, and asking sooner changes nothing.
func retryWait(code protocol.ErrorCode, retries int, interval time.Duration) time.Duration {
	if !code.ServedElsewhere() {
		return interval
	}
	d := errBackoffMax
	if retries >= 1 && retries <= 4 {
		d = errBackoffMin << (retries - 1)
	}
	return min(d, errBackoffMax, interval)
}

// jitter adds up to a tenth of d, at random.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + rand.N(d/10+1)
}

// afterAnswer runs what waited for the heartbeat in flight.
func (a *memberActor) afterAnswer() {
	a.maybeLeave()
	if a.beatAgain {
		a.beatAgain = false
		a.beat()
	}
}

// takeLease adopts the coordinator's member lease when it is shorter than
// the member's own (docs/protocol.md, memberLeaseMs): the member must never
// believe it may read after the coordinator stopped counting it as a
// reader. A difference is logged once per Runtime.
func (a *memberActor) takeLease(resp protocol.HeartbeatResponse) {
	if resp.MemberLeaseMs <= 0 {
		return
	}
	theirs := time.Duration(resp.MemberLeaseMs) * time.Millisecond
	own := a.rs.cfg.memberLease
	if theirs != own && a.rs.leaseWarned.CompareAndSwap(false, true) {
		a.log.Warn("the coordinator's member lease differs from WithMemberLease; using the shorter",
			slog.Duration("coordinator", theirs), slog.Duration("own", own), slog.Duration("used", min(own, theirs)))
	}
	a.core.lease.setLength(min(own, theirs))
}

// checkAnswer rejects answers that are not answers to req.
func checkAnswer(m *answerMsg) error {
	if m.err != nil {
		return m.err
	}
	if m.resp.ResponseTo != m.req.RequestID {
		return fmt.Errorf("answer is for request %q, not %q", m.resp.ResponseTo, m.req.RequestID)
	}
	return nil
}

// takeTiming takes the heartbeat interval and rebalance timeout of an
// answer; values that are not positive keep the protocol defaults.
func (a *memberActor) takeTiming(resp protocol.HeartbeatResponse) {
	interval := protocol.DefaultHeartbeatInterval
	if resp.HeartbeatIntervalMs > 0 {
		interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
	}
	a.interval = a.capInterval(interval)
	if resp.RebalanceTimeoutMs > 0 {
		a.rebalance = time.Duration(resp.RebalanceTimeoutMs) * time.Millisecond
	}
}

// capInterval caps the heartbeat interval at a third of the member lease:
// a coordinator configured with an interval near its lease would make the
// member fail closed between two heartbeats that both succeed.
func (a *memberActor) capInterval(d time.Duration) time.Duration {
	return min(d, a.core.lease.length()/3)
}

// forgetReported drops the REVOKED reports the coordinator has now seen.
func (a *memberActor) forgetReported(req protocol.HeartbeatRequest) {
	for _, r := range req.RevokingShards {
		if !r.Terminal() {
			continue
		}
		if rv := a.revoking[r.Shard.ShardIndex]; rv != nil && rv.released {
			delete(a.revoking, r.Shard.ShardIndex)
		}
	}
}

// rejoin handles UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH (rule 8): stop
// reads and ACKs at once, clear ownership, send a full heartbeat with
// epoch 0.
func (a *memberActor) rejoin(status protocol.Status) {
	a.log.Warn("coordinator dropped this member: reads and ACKs stopped; rejoining",
		slog.String("status", string(status)), slog.Int64("epoch", a.epoch), slog.Any("owned", a.owned))
	leaseLeft := a.core.lease.until()
	a.core.lease.drop()
	a.fenceAll(ErrFenced)
	// A handler still running (its context is cancelled, but it may not
	// look) is still reading its shard. The join frees this member's shards
	// at once (the same instanceId, docs/protocol.md §9.2), so it waits
	// until the lease of the last answer has passed, as the coordinator
	// would before freeing them to a member it could not tell apart from a
	// new process.
	handling := false
	for _, run := range a.runs {
		handling = handling || run.inFlight() > 0
	}
	// Runs stay in a.runs until their read loops return, so that no new
	// run of a shard starts beside an old one (rule 6).
	a.owned = []int{}
	clear(a.revoking)
	a.epoch, a.version = protocol.EpochJoin, 0
	a.lastView, a.catchingUp = "", false
	a.suspended = false
	a.rejoins++
	if a.leaving {
		a.maybeLeave()
		return
	}
	a.rejoinAt = 0
	if handling && leaseLeft > 0 {
		a.log.Info("rejoin waits for the lease of the last answer: handlers still run", slog.Duration("wait", leaseLeft))
		a.rejoinAt = a.core.lease.now() + leaseLeft
	}
	if a.rejoins == 1 {
		a.after(0)
	} else {
		a.after(a.interval)
	}
}

// scheduleLease checks the lease again at its deadline.
func (a *memberActor) scheduleLease(deadline time.Duration) {
	stopTimer(&a.leaseTimer)
	a.leaseTimer = a.timer(deadline-a.core.lease.now(), &leaseCheckMsg{})
}

// checkLease fails closed when the lease has passed (rule 9): every run
// stops reads and ACKs; ownership is kept and reads resume on a later OK.
func (a *memberActor) checkLease() {
	if a.suspended || a.stopped || a.epoch <= 0 {
		return
	}
	if left := a.core.lease.until(); left > 0 {
		a.leaseTimer = a.timer(left, &leaseCheckMsg{})
		return
	}
	a.suspend("assignment lease expired without a successful heartbeat: reads and ACKs stopped on every shard until an OK")
}

// suspend fails closed on a lapsed lease (rule 9): every run stops reads
// and ACKs at once; ownership is kept and an OK resumes reads.
func (a *memberActor) suspend(msg string) {
	a.suspended = true
	a.log.Warn(msg, slog.Duration("memberLease", a.core.lease.length()), slog.Any("owned", a.owned))
	a.rs.hooks.leaseLost(a.core.ctx)
	a.fenceAll(ErrLeaseExpired)
}
