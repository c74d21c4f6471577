package member

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// leaveReserve is the part of the time left to a leave that is kept for
// what follows the drain: the leave heartbeat, stopping the workers and
// the actors. The drain ends that long before the leave's deadline.
func leaveReserve(total time.Duration) time.Duration {
	return min(total/4, 5*time.Second)
}

// onRunEnding handles Run's context ending (leaveMsg): the member leaves
// for good, and everything it does from now on ends by by (WithLeaveTimeout
// after the cancel). A leave already under way (giving the shards back
// after Redis failures) keeps going, but its drain ends no later than
// this deadline allows.
func (a *memberActor) onRunEnding(by time.Time) {
	a.exitWanted = true
	a.stopBy = by
	if !a.leaving {
		a.beginLeave(by)
		return
	}
	drainEnd := a.core.lease.now() + time.Until(by) - leaveReserve(time.Until(by))
	if !a.leaveSent && drainEnd < a.leaveAt {
		a.setLeaveDeadline(drainEnd)
	}
}

// setLeaveDeadline makes the drain of the leave end at at (lease clock).
// A revoked run's drain deadline is not moved here: leaveDeadline
// abandons every run still draining when it fires.
func (a *memberActor) setLeaveDeadline(at time.Duration) {
	a.leaveAt = at
	stopTimer(&a.leaveTimer)
	a.leaveTimer = a.timer(at-a.core.lease.now(), &leaveDeadlineMsg{})
}

// beginLeave starts the graceful leave (rule 13): stop reads on every
// shard, drain, then (maybeLeave) send memberEpoch -1, all by by (zero:
// WithLeaveTimeout from now). The drain ends leaveReserve before by.
func (a *memberActor) beginLeave(by time.Time) {
	if a.leaving || a.done || a.stopped {
		return
	}
	if by.IsZero() {
		by = time.Now().Add(a.rs.cfg.leaveTimeout)
	}
	a.leaving = true
	total := time.Until(by)
	a.setLeaveDeadline(a.core.lease.now() + total - leaveReserve(total))
	a.log.Info("leaving: stopping reads and draining", slog.Any("owned", a.owned))
	reason := ReasonLeaving
	if a.giveBack {
		reason = ReasonRedisFailed
	}
	a.revokeSet(a.owned, a.core.lease.now(), reason)
	a.owned = []int{}
	a.maybeLeave()
}

// leaveDeadline gives up waiting for the drain: runs still draining are
// abandoned and the leave is sent.
func (a *memberActor) leaveDeadline() {
	if !a.leaving || a.leaveSent {
		return
	}
	a.leaveExpired = true
	if len(a.runs) > 0 {
		a.log.Warn("leave timeout passed: abandoning records still in flight (they stay pending)",
			slog.Int("runs", len(a.runs)))
		a.fenceAll(ErrRevoked)
		for _, s := range slices.Sorted(maps.Keys(a.revoking)) {
			if rv := a.revoking[s]; rv != nil && !rv.drained {
				a.release(s, rv)
			}
		}
	}
	a.maybeLeave()
}

// maybeLeave sends the leave heartbeat once every run has drained (or the
// leave timeout passed), every read loop has returned and no heartbeat is
// in flight.
//
// The read loops are waited for even after the leave timeout: the leave
// reports every shard REVOKED, which frees them at once, while a blocking
// XREADGROUP issued before would still take records written to its shard
// into this consumer's pending list beside the next owner's reads. The
// wait is short, as blocking reads are interrupted (readConn); without a
// read connection it is up to one read (WithBlock, or the lease left when
// it was issued).
func (a *memberActor) maybeLeave() {
	if !a.leaving || a.leaveSent || a.done || a.hbBusy {
		return
	}
	if (len(a.runs) > 0 && !a.leaveExpired) || a.reading() {
		return
	}
	a.leaveSent = true
	stopTimer(&a.beatTimer)
	if a.epoch <= 0 {
		// Never joined, or dropped by the coordinator: nothing to leave.
		// A give-back (Redis failing) is not an exit: the member waits
		// for Redis and joins again, as after a leave that was sent.
		if a.giveBack && !a.exitWanted {
			a.afterGiveBack()
			return
		}
		a.finish(nil)
		return
	}
	req := a.request()
	req.MemberEpoch = protocol.EpochLeave
	req.OwnedShards = []protocol.Shard{}
	req.ShardProgress = []protocol.ShardProgress{}
	for i := range req.RevokingShards {
		// Everything still listed has been let go: drained, or abandoned
		// with its ACK gate closed.
		req.RevokingShards[i].State, req.RevokingShards[i].InFlight = protocol.RevokeRevoked, 0
	}
	a.send(req, true)
}

func (a *memberActor) onLeaveAnswer(m *answerMsg) {
	switch err := checkAnswer(m); {
	case err != nil:
		a.log.Warn("leave heartbeat failed; the coordinator expires this member after its lease", slog.Any("error", err))
	case m.resp.Status != protocol.StatusOK:
		a.log.Warn("leave heartbeat answered", slog.String("status", string(m.resp.Status)))
	default:
		a.log.Info("left the group")
	}
	a.core.lease.drop()
	if a.giveBack && !a.exitWanted {
		a.afterGiveBack()
		return
	}
	a.epoch = protocol.EpochLeave
	a.finish(nil)
}
