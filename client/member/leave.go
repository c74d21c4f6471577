package member

import (
	"log/slog"
	"maps"
	"slices"

	"github.com/rscoord/rscoord/client/protocol"
)

// beginLeave starts the graceful leave (rule 13): stop reads on every
// shard, drain, then (maybeLeave) send memberEpoch -1.
func (a *memberActor) beginLeave() {
	if a.leaving || a.done || a.stopped {
		return
	}
	a.leaving = true
	a.leaveAt = a.core.lease.now() + a.rs.cfg.leaveTimeout
	a.leaveTimer = a.timer(a.rs.cfg.leaveTimeout, &leaveDeadlineMsg{})
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
