package assign

import (
	"fmt"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Heartbeat runs docs/protocol.md §6.1 steps 3–9 on g for a request that passed
// [Validate], at time now. It mutates g and returns the response with what
// the actor must do before sending it (see [Result]).
//
// Per call: maintenance first (expired leases, rebalance deadlines of other
// members, prunes), then metadata correction, epoch rules, ownership
// validation, recording the report, reassignment when membership or layout
// changed, rebalance deadlines, and the answer. A steady heartbeat of a
// STABLE group does O(its own shards) work and persists nothing.
func Heartbeat(g *Group, req *protocol.HeartbeatRequest, now time.Time, cfg Config) Result {
	o := begin(g, now, cfg)
	// Step 3. The requester's own rebalance deadline is judged after its
	// report is recorded (step 8): the report may be the one releasing the
	// shards.
	if o.maintain(false, req.MemberID) && o.reassign {
		o.runAssignor()
	}
	kind, m := o.decide(req)
	if m != nil && req.InstanceID != "" && req.InstanceID == m.InstanceID && req.RequestSeq > m.lastSeq {
		m.lastSeq = req.RequestSeq
	}
	o.finish()
	resp := o.answer(kind, m, req)
	if o.persist || g.CorrectionOpen {
		// The answer may have changed the member's grants, which unblocks
		// others: group state and round follow.
		o.finish()
	}
	return o.result(resp)
}

// answer says how a heartbeat is answered once the call's follow-up work
// is done.
type answer int

const (
	answerView         answer = iota // OK or REVOKE_PENDING with the member's view
	answerJoin                       // a (re)join: the view, the member counts as synced
	answerSync                       // SYNC_METADATA
	answerLeave                      // OK, epoch -1, empty assignment
	answerFenced                     // FENCED_MEMBER_EPOCH
	answerUnknown                    // UNKNOWN_MEMBER_ID
	answerRetry                      // RETRY (duplicate member id)
	answerInvalid                    // INVALID_REQUEST (an epoch or version from the future)
	answerTooFar                     // INVALID_REQUEST (a version beyond the bounded correction step)
	answerStale                      // FENCED_MEMBER_EPOCH to a foreign incarnation, member untouched
	answerForeignLeave               // a leave of a foreign incarnation: answered as a leave, member untouched
	answerGroupFull                  // RETRY with MEMBER_LIMIT_REACHED: a join past Config.MaxMembers
)

// decide applies steps 4–7, with the incarnation rules and bounded
// corrections of docs/protocol.md, and says how to answer.
func (o *op) decide(req *protocol.HeartbeatRequest) (answer, *Member) {
	g := o.g
	m := g.Members[req.MemberID]
	e := req.MemberEpoch
	if m != nil && req.InstanceID != "" && req.InstanceID == m.InstanceID && req.RequestSeq > 0 && req.RequestSeq < m.lastSeq {
		// A late request of the member's own process: a later one was
		// decided already. Its report is older than what the member may
		// read by now (it may omit a shard granted since), and deciding it
		// could let go of shards the member reads. Nothing changes. The
		// last one decided may be decided again: a held answer is
		// computed by running its request again.
		return answerRetry, m
	}
	if m != nil && e != protocol.EpochJoin && req.InstanceID != m.InstanceID {
		// Another incarnation than the stored one: an old process back
		// after its member was taken over, or a second process with the
		// same id. It is told alone; the stored member is untouched.
		o.ev.StaleIncarnation = true
		if e == protocol.EpochLeave {
			return answerForeignLeave, m
		}
		return answerStale, m
	}
	if m != nil && e != protocol.EpochJoin && req.MetadataVersion < m.JoinVersion {
		// Sent before the current incarnation joined (its process had
		// that answer's version before it had an epoch): an earlier
		// process under the same id, a copy held up in the network.
		// Reference clients send no instanceId to tell them apart. A
		// leave would end the membership of the process that joined
		// since and free what it reads; a heartbeat could fence it. The
		// caller alone is told; the member is untouched.
		o.ev.StaleIncarnation = true
		if e == protocol.EpochLeave {
			return answerForeignLeave, m
		}
		return answerStale, m
	}
	if m != nil && e > 0 && req.MetadataVersion > g.MetadataVersion && !withinCorrection(g, req.MetadataVersion, o.cfg) {
		// A version no coordinator of this group issued, nor a history
		// the store lost (correction.go): a client bug or a forged
		// report. Moving the group there would leave it unusable for
		// everyone, or let one member push it up at its heartbeat rate;
		// refuse this member alone. A member the group does not know is
		// told UNKNOWN_MEMBER_ID instead, whatever it reports: that
		// answer makes every client stop reading and join again, where
		// the reference's JVM starter repeats a refused heartbeat and
		// reads on.
		return answerTooFar, m
	}
	if needsSync(g, m, req) {
		return o.syncMetadata(m, req), m
	}
	switch {
	case m == nil && e == protocol.EpochJoin:
		if !o.roomToJoin() {
			o.ev.MemberLimitReached = true
			return answerGroupFull, nil
		}
		kind := o.join(req)
		return kind, g.Members[req.MemberID]
	case m == nil:
		return answerUnknown, nil
	case e == protocol.EpochJoin:
		return o.epochZero(m, req), m
	case m.State == protocol.MemberExpired || m.State == protocol.MemberFenced:
		return answerFenced, m
	case e == protocol.EpochLeave:
		return o.leave(m, req), m
	case m.State == protocol.MemberLeaving:
		return answerFenced, m
	}
	// A positive epoch of the live member's own incarnation: from here on
	// this coordinator knows every epoch the member may carry (the one it
	// sends now, and what it is answered), whatever the outcome.
	confirmed := m.epochConfirmed
	m.epochConfirmed = true
	if e > m.Epoch {
		if confirmed || e > g.AssignmentEpoch {
			if g.loaded {
				// In a group loaded from the store, an epoch this process
				// never answered the member may come from a history the
				// store no longer has (it went back: a restored backup),
				// with a version the loaded group has issued again since
				// (a correction jump, the reassignment on load), so the
				// version check above let it through; and the epoch itself
				// may be one issued again, the member confirmed at a lower
				// one by a late copy decided since the load. The report
				// may name shards that history granted: it is decided as
				// a correction, which keeps what the member holds blocked
				// until it proves it released them and answers with its
				// stored epoch, which the member takes. Refused
				// INVALID_REQUEST, our runtime would stop for good. It
				// opens no round: the member itself is what is in doubt.
				o.ev.LostEpoch = true
				return o.syncMember(m, req), m
			}
			return answerInvalid, m
		}
		// Loaded from the store: the member may carry an epoch this
		// coordinator answered but never wrote (an epoch catch-up, see
		// catchUp). It is no higher than the assignment epoch, which is
		// written before any answer carries it: processed as current.
		m.PreviousEpoch, m.Epoch = m.Epoch, e
		o.ev.ForgottenEpochAccepted = true
	}
	owned := ownedOf(m, req)
	if e < m.Epoch {
		if e != m.PreviousEpoch || !o.tolerable(m, owned) {
			o.fence(m)
			return answerFenced, m
		}
		o.ev.PreviousEpochAccepted = true
		o.heldEpoch = e
	}
	revoking := nonTerminal(req.RevokingShards)
	if !o.authorized(m, owned, revoking, req.ShardProgress) {
		o.fence(m)
		return answerFenced, m
	}
	o.record(m, req, owned, revoking)
	return answerView, m
}

// epochZero decides an epoch-0 heartbeat naming known member m
// (docs/protocol.md, member incarnations; first match wins):
//
//   - the join that created the current incarnation (same instanceId and
//     requestId) after the member reported: a late copy whose sender has
//     its answer; RETRY, nothing changes (a view would recompute its grants
//     from a request older than what it reads);
//   - the same incarnation (same instanceId, or neither has one and the
//     requestId is the stored join's) that has not reported since its join:
//     a replay of a lost join answer, answered the same, nothing changes;
//   - the same incarnation with an instanceId, or any epoch-0 heartbeat of
//     a member that is no longer live and holds nothing: a rejoin; the
//     process owns nothing now, so what it held is free at once;
//   - a member that is no longer live but still holds shards, asked
//     without instanceId on both sides (a reference client answered
//     FENCED, or a second process: nothing tells them apart): RETRY until
//     its holdings are released when the lease of its last readable answer
//     lapses, then a rejoin. Safety first: only an instanceId proves the
//     asker is the process that may still be reading;
//   - anything else is a second process using the id (or a restarted one
//     that is early): RETRY, nothing changes. The newcomer rejoins once the
//     live incarnation's lease has lapsed and its shards are released.
func (o *op) epochZero(m *Member, req *protocol.HeartbeatRequest) answer {
	sameInstance := req.InstanceID == m.InstanceID
	replay := sameInstance && (req.InstanceID != "" || req.RequestID == m.JoinRequestID)
	switch {
	case sameInstance && req.InstanceID != "" && req.RequestSeq > 0 && req.RequestSeq < m.JoinSeq:
		// An earlier join attempt of the process that joined since (held
		// up in the network, and decided after a restart forgot the last
		// requestSeq, which would have refused it): a rejoin would free
		// what the process reads by now. RETRY, nothing changes.
		return answerRetry
	case sameInstance && m.Reported && req.RequestID == m.JoinRequestID:
		// A late copy of the join that created this incarnation (held up
		// in the network while its retry, same requestId, was answered):
		// the process has its answer, since it reported after it, and may
		// be reading what later answers gave it. Rejoining would free
		// those shards, and even a view would judge its grants by a
		// request older than what it reads: RETRY, nothing changes.
		return answerRetry
	case m.State.Live() && replay && !m.Reported:
		o.recordLiveness(m, req)
		return answerView
	case m.State.Live() && sameInstance && req.InstanceID != "":
		return o.rejoin(m, req)
	case !m.State.Live() && (!holds(m) || sameInstance && req.InstanceID != ""):
		return o.rejoin(m, req)
	case !m.State.Live() && sameInstance:
		// Maybe the fenced process itself, maybe another: wait for the
		// lease (not counted as a duplicate).
		return answerRetry
	}
	o.ev.DuplicateMember = true
	return answerRetry
}

// ownedOf returns the reported owned set; when it equals the accepted
// current set it returns that (read-only), so that a steady heartbeat
// allocates nothing for it.
func ownedOf(m *Member, req *protocol.HeartbeatRequest) []int {
	if sameAsWire(m.Current, req.OwnedShards) {
		return m.Current
	}
	return fromWire(req.OwnedShards)
}

// tolerable reports whether a heartbeat carrying m's previous epoch is a
// lost response rather than a zombie: every shard it reports owned is in
// its current target, or is one we already accepted it holds (the lost
// response may have been the one revoking it; blocked sets keep its new
// owner off it until it is reported released). docs/protocol.md names only the
// target; see doc.go for why we also accept held shards.
func (o *op) tolerable(m *Member, owned []int) bool {
	return subsetOfAny(owned, o.g.Target[m.ID], m.Current, m.Revoking, m.Granted)
}

// record applies step 7 to a validated report.
func (o *op) record(m *Member, req *protocol.HeartbeatRequest, owned, revoking []int) {
	if m.Name != req.MemberName {
		m.Name = req.MemberName
		o.memberChanged(m)
	}
	kept := unproven(m, req, owned, revoking)
	o.setCurrent(m, owned)
	if len(revoking) > 0 {
		revoking = minus(revoking, owned)
	}
	if len(kept) > 0 {
		revoking = union(revoking, kept)
	}
	o.setRevoking(m, revoking)
	o.keepWithdrawn(m)
	o.recordProgress(m, req.ShardProgress, false)
	o.recordLiveness(m, req)
	m.MetadataVersion = req.MetadataVersion
	if !m.Reported {
		m.Reported = true
		o.memberChanged(m)
	}
}

// recordProgress keeps the member's last progress report (not durable). It
// reuses the member's slice: a steady heartbeat allocates nothing. With
// filter, entries for shards the member is not known to hold are dropped
// instead of having been validated.
func (o *op) recordProgress(m *Member, ps []protocol.ShardProgress, filter bool) {
	m.Progress = m.Progress[:0]
	for _, p := range ps {
		s := p.Shard.ShardIndex
		if filter && !contains(m.Current, s) && !contains(m.Revoking, s) && !contains(m.Granted, s) {
			continue
		}
		m.Progress = append(m.Progress, p)
	}
}

// answer builds the response after the call's follow-up work.
func (o *op) answer(kind answer, m *Member, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse {
	if m != nil && o.g.Members[m.ID] != m {
		m = nil // pruned meanwhile; cannot happen for the requester, but be safe
	}
	if m != nil && m.State == protocol.MemberFenced && kind < answerRetry {
		// Fenced by this call (stale epoch, bad claim, rebalance deadline)
		// or before.
		kind = answerFenced
	}
	switch kind {
	case answerView, answerJoin:
		if m == nil || !m.State.Live() {
			return o.groupAnswer(req, protocol.StatusFencedMemberEpoch, req.MemberEpoch)
		}
		return o.view(m, req, kind == answerJoin)
	case answerSync:
		return o.syncView(m, req)
	case answerLeave:
		if m != nil && len(m.Revoking) > 0 {
			// An OK leave answer lets the leaver finish what it still
			// drains for one more lease.
			m.ReadableUntil = o.now.Add(o.cfg.MemberLease)
		}
		return o.groupAnswer(req, protocol.StatusOK, protocol.EpochLeave)
	case answerFenced:
		epoch := req.MemberEpoch
		if m != nil {
			epoch = m.Epoch
		}
		return o.groupAnswer(req, protocol.StatusFencedMemberEpoch, epoch)
	case answerStale:
		// The caller's own epoch echoed: the group's epochs belong to the
		// live incarnation.
		return o.groupAnswer(req, protocol.StatusFencedMemberEpoch, req.MemberEpoch)
	case answerForeignLeave:
		return o.groupAnswer(req, protocol.StatusOK, protocol.EpochLeave)
	case answerUnknown:
		return Unknown("", "").Answer(req, o.cfg)
	case answerRetry:
		resp := Retry().Answer(req, o.cfg)
		if m != nil {
			// The newcomer may take the id once the live incarnation's lease
			// lapses and what it held is released: ask it back just after
			// that, not a whole interval later, so a replaced pod rejoins in
			// one round trip.
			until := m.LeaseExpiresAt
			if !m.State.Live() || m.ReadableUntil.After(until) {
				until = m.ReadableUntil
			}
			wait := min(max(until.Sub(o.now)+o.cfg.ReconcileInterval, o.cfg.ReconcileInterval), o.cfg.HeartbeatInterval)
			resp.HeartbeatIntervalMs = millis(wait)
		}
		if o.ev.DuplicateMember {
			// Said apart from other RETRYs, so that the newcomer can tell
			// its operator why it does not join (reference clients
			// ignore the field).
			resp.ErrorCode = protocol.CodeMemberIDInUse
			resp.Message = "another live process holds this member id (a different instanceId); this one joins once that one's lease lapses"
		}
		return resp
	case answerGroupFull:
		resp := Retry().Answer(req, o.cfg)
		resp.ErrorCode = protocol.CodeMemberLimitReached
		resp.Message = fmt.Sprintf("the group holds %d members, the most this coordinator allows; the join is retried until one leaves", o.cfg.MaxMembers)
		return resp
	case answerTooFar:
		return Invalid("metadataVersion is further ahead of the group's than a metadata correction may move it").Answer(req, o.cfg)
	default:
		return Invalid(fmt.Sprintf("memberEpoch %d is ahead of every epoch this member was given", req.MemberEpoch)).Answer(req, o.cfg)
	}
}

// view answers a live member (step 9): memberEpoch =
// assignmentEpoch; REVOKE_PENDING with assigned = current ∩ (target −
// blocked) while a correction round is open, else OK with assigned =
// target − blocked; pending = target − assigned; granted = assigned.
func (o *op) view(m *Member, req *protocol.HeartbeatRequest, joined bool) protocol.HeartbeatResponse {
	g := o.g
	// An epoch catch-up alone is not written (see catchUp); a join or
	// anything else that changed the member is.
	o.catchUp(m, g.AssignmentEpoch)
	if joined {
		// A joiner owns nothing and saw no lost state: it is in sync.
		m.MetadataVersion = g.MetadataVersion
		if m.JoinVersion != g.MetadataVersion {
			m.JoinVersion = g.MetadataVersion
			o.memberChanged(m)
		}
	}
	target := g.Target[m.ID]
	assigned := o.assignable(m)
	status := protocol.StatusOK
	if g.CorrectionOpen {
		status = protocol.StatusRevokePending
		assigned = intersect(m.Current, assigned)
	}
	return o.respond(m, req, status, m.Epoch, assigned, target)
}

// syncView answers SYNC_METADATA with the member's stored epoch: assigned =
// what it reported owning ∩ (target − blocked), recorded as its current
// set; pending = the rest of its target.
func (o *op) syncView(m *Member, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse {
	if !m.State.Live() {
		return o.groupAnswer(req, protocol.StatusFencedMemberEpoch, m.Epoch)
	}
	assigned := intersect(m.Current, o.assignable(m))
	return o.respond(m, req, protocol.StatusSyncMetadata, m.Epoch, assigned, o.g.Target[m.ID])
}

// respond records the grant and builds an answer carrying an assignment.
// Every such answer lets the member read its assigned shards for one lease
// from now (ReadableUntil); a shard it did not already hold gets a new
// owner epoch; the first answer that tells it to give up a shard it holds
// starts its rebalance deadline.
func (o *op) respond(m *Member, req *protocol.HeartbeatRequest, status protocol.Status, epoch int64, assigned, target []int) protocol.HeartbeatResponse {
	g := o.g
	if !equalSets(assigned, m.Granted) {
		for _, s := range assigned {
			if !contains(m.Granted, s) && !contains(m.Current, s) && !contains(m.Revoking, s) {
				o.raiseOwnerEpoch(s)
			}
		}
	}
	for _, s := range assigned {
		if s >= len(g.OwnerEpochs) || g.OwnerEpochs[s] <= 0 {
			// A shard held since before owner epochs existed.
			o.raiseOwnerEpoch(s)
		}
	}
	o.withdraw(m, assigned)
	if m.RebalanceDeadline.IsZero() && (!subset(m.Current, assigned) || !subset(m.Revoking, assigned)) {
		o.setDeadline(m, o.now.Add(o.cfg.RebalanceTimeout))
	}
	o.setGranted(m, assigned)
	m.ReadableUntil = o.now.Add(o.cfg.MemberLease)
	var pending []int
	if len(assigned) != len(target) {
		pending = minus(target, assigned)
	}
	// Step 9 (ours): heartbeat fast while a hand-off is under way — shards
	// still pending, shards held outside the target, or shards granted but
	// not yet reported as read. The last keeps a receiving member from
	// waiting a whole interval before it says it took its shards, which is
	// what lets the group reach STABLE (and the giver see it) in round trips.
	interval := o.cfg.HeartbeatInterval
	if len(pending) > 0 || holdsOutside(m, target) || !subset(assigned, m.Current) {
		interval = o.cfg.ReconcileInterval
	}
	return protocol.HeartbeatResponse{
		ResponseTo:          req.RequestID,
		Status:              status,
		MemberID:            m.ID,
		MemberEpoch:         epoch,
		HeartbeatIntervalMs: millis(interval),
		RebalanceTimeoutMs:  millis(o.cfg.RebalanceTimeout),
		GroupEpoch:          g.GroupEpoch,
		AssignmentEpoch:     g.AssignmentEpoch,
		MetadataVersion:     g.MetadataVersion,
		Assignment: protocol.Assignment{
			AssignedShards:  o.ownedWire(assigned),
			PendingShards:   toWire(pending),
			MetadataVersion: g.MetadataVersion,
		},
		MemberLeaseMs: millis(o.cfg.MemberLease),
	}
}

// ownedWire turns assigned shards into wire shards carrying their owner
// epochs.
func (o *op) ownedWire(assigned []int) []protocol.Shard {
	out := toWire(assigned)
	for i := range out {
		if s := out[i].ShardIndex; s < len(o.g.OwnerEpochs) {
			out[i].OwnerEpoch = o.g.OwnerEpochs[s]
		}
	}
	return out
}

// raiseOwnerEpoch gives shard s a new owner epoch: it is being granted to a
// member that did not already hold it.
func (o *op) raiseOwnerEpoch(s int) {
	g := o.g
	if s < 0 {
		return
	}
	if s >= len(g.OwnerEpochs) {
		g.OwnerEpochs = append(g.OwnerEpochs, make([]int64, s+1-len(g.OwnerEpochs))...)
	}
	g.OwnerEpochs[s]++
	o.raised = append(o.raised, s)
	o.persist = true
}

// groupAnswer is an answer without an assignment that still carries the
// group's epochs and version (leave, fenced).
func (o *op) groupAnswer(req *protocol.HeartbeatRequest, status protocol.Status, epoch int64) protocol.HeartbeatResponse {
	g := o.g
	return protocol.HeartbeatResponse{
		ResponseTo:          req.RequestID,
		Status:              status,
		MemberID:            req.MemberID,
		MemberEpoch:         epoch,
		HeartbeatIntervalMs: millis(o.cfg.HeartbeatInterval),
		RebalanceTimeoutMs:  millis(o.cfg.RebalanceTimeout),
		GroupEpoch:          g.GroupEpoch,
		AssignmentEpoch:     g.AssignmentEpoch,
		MetadataVersion:     g.MetadataVersion,
		Assignment:          protocol.EmptyAssignment(g.MetadataVersion),
		MemberLeaseMs:       millis(o.cfg.MemberLease),
	}
}

// millis is d in whole milliseconds, at least 1: clients sleep on it, and a
// zero would make them spin.
func millis(d time.Duration) int64 {
	return max(1, d.Milliseconds())
}
