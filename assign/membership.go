package assign

import (
	"github.com/rscoord/rscoord/client/protocol"
)

// Membership transitions of docs/protocol.md §6.1 step 5. Each mutates the group
// through op and says how to answer; the answer itself is built after the
// call's follow-up work (assignment, deadlines, metadata bump), because it
// carries their outcome.

// join registers an unknown member heartbeating with epoch 0 as ACTIVE. Its
// report is ignored: a joining process owns nothing yet.
func (o *op) join(req *protocol.HeartbeatRequest) answer {
	m := &Member{
		ID:            req.MemberID,
		State:         protocol.MemberActive,
		JoinedAt:      o.now,
		InstanceID:    req.InstanceID,
		JoinRequestID: req.RequestID,
		JoinSeq:       req.RequestSeq,
		// Every epoch it is answered comes from this coordinator.
		epochConfirmed: true,
	}
	m.StateChangedAt = o.now
	o.g.Members[m.ID] = m
	o.dirty(m)
	o.recordLiveness(m, req)
	m.Name = req.MemberName
	o.bump()
	o.touch(m)
	o.ev.Joined = append(o.ev.Joined, m.ID)
	return answerJoin
}

// rejoin takes back a known member heartbeating with epoch 0 (see
// epochZero): a new incarnation that owns nothing, so what the member held
// is free at once.
func (o *op) rejoin(m *Member, req *protocol.HeartbeatRequest) answer {
	o.clearOwnership(m)
	o.setState(m, protocol.MemberActive)
	m.JoinedAt = o.now
	// A new incarnation of the member: every epoch it is answered from
	// now on comes from this coordinator.
	m.epochConfirmed = true
	if m.InstanceID != req.InstanceID {
		m.lastSeq = 0 // another process: its own sequence
	}
	if m.InstanceID != req.InstanceID || m.JoinRequestID != req.RequestID || m.JoinSeq != req.RequestSeq {
		m.InstanceID, m.JoinRequestID, m.JoinSeq = req.InstanceID, req.RequestID, req.RequestSeq
		o.memberChanged(m)
	}
	if m.Reported {
		m.Reported = false
		o.memberChanged(m)
	}
	if m.Name != req.MemberName {
		m.Name = req.MemberName
		o.memberChanged(m)
	}
	m.Progress = nil
	o.recordLiveness(m, req)
	o.bump()
	o.ev.Joined = append(o.ev.Joined, m.ID)
	return answerJoin
}

// leave handles epoch -1 from a live or LEAVING member. The member reads
// nothing any more; what it still reports as non-terminal revoking stays
// blocked for others until it is reported terminal, its lease passes or its
// rebalance deadline passes. Unlike other heartbeats a leave is not fenced
// for a bad report: shards outside its authority are dropped instead, so a
// confused leaver can neither keep nor block someone else's shard.
func (o *op) leave(m *Member, req *protocol.HeartbeatRequest) answer {
	reported := nonTerminal(req.RevokingShards)
	if m.State.Live() {
		revoking := intersect(reported, o.authority(m))
		o.setState(m, protocol.MemberLeaving)
		o.setCurrent(m, nil)
		o.setGranted(m, nil)
		o.setRevoking(m, revoking)
		o.bump()
		o.ev.Left = append(o.ev.Left, m.ID)
	} else {
		// A repeated leave may only report progress: shards go from
		// revoking to released, never back.
		o.setRevoking(m, intersect(reported, m.Revoking))
	}
	// A leave speaks for everything: the member reads nothing it does not
	// list, and sends nothing but leaves after it.
	o.keepWithdrawn(m)
	if len(m.Revoking) > 0 {
		// The answer tells it to give them up: its rebalance deadline runs
		// from this answer on (and the OK answer lets it finish its
		// in-flight work for one more lease, see answer).
		if m.RebalanceDeadline.IsZero() {
			o.setDeadline(m, o.now.Add(o.cfg.RebalanceTimeout))
		}
	}
	m.Progress = nil
	o.recordLiveness(m, req)
	m.MetadataVersion = req.MetadataVersion
	return answerLeave
}

// recordLiveness records what a heartbeat says about the member's process,
// none of it durable: capacity, last heartbeat, lease.
func (o *op) recordLiveness(m *Member, req *protocol.HeartbeatRequest) {
	m.MaxConcurrency = req.RuntimeConsumerCapacity.RuntimeMaxConcurrency
	m.AvailableConcurrency = req.RuntimeConsumerCapacity.AvailableConcurrency
	m.LastHeartbeat = o.now
	m.LeaseExpiresAt = o.now.Add(o.cfg.MemberLease)
}
