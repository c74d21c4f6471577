package assign

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// t0 is the start of every test clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{
		HeartbeatInterval:    3 * time.Second,
		ReconcileInterval:    200 * time.Millisecond,
		MemberLease:          15 * time.Second,
		RebalanceTimeout:     60 * time.Second,
		StaleMemberRetention: 10 * time.Minute,
	}
}

// hb builds a heartbeat request.
func hb(id string, epoch, version int64, owned []int, revoking ...protocol.RevokingShard) *protocol.HeartbeatRequest {
	return &protocol.HeartbeatRequest{
		ProtocolVersion: 1,
		RequestID:       fmt.Sprintf("hb-%s-%d", id, epoch),
		MemberID:        id,
		MemberName:      "svc",
		MemberEpoch:     epoch,
		MetadataVersion: version,
		// One process per member id unless a test says otherwise.
		InstanceID: "inst-" + id,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{
			RuntimeMaxConcurrency: 4,
			AvailableConcurrency:  2,
		},
		OwnedShards:    protocol.Shards(owned),
		RevokingShards: revoking,
	}
}

func joinReq(id string) *protocol.HeartbeatRequest { return hb(id, 0, 0, nil) }

// dupJoin is an epoch-0 heartbeat of a second process using member id id,
// a reference client: no instanceId, and a requestId no join of id used.
func dupJoin(id string) *protocol.HeartbeatRequest {
	req := joinReq(id)
	req.RequestID = "second-process-" + id
	req.InstanceID = ""
	return req
}

// leaveReq is a leave of a member that applied every answer: it carries
// g's metadata version.
func leaveReq(g *Group, id string, revoking ...protocol.RevokingShard) *protocol.HeartbeatRequest {
	return hb(id, -1, g.MetadataVersion, nil, revoking...)
}

func revokingShard(s int, st protocol.RevokeState, inFlight int) protocol.RevokingShard {
	return protocol.RevokingShard{Shard: protocol.Shard{ShardIndex: s}, State: st, InFlight: inFlight}
}

func assigned(r protocol.HeartbeatResponse) []int {
	return protocol.Indexes(r.Assignment.AssignedShards)
}

func pending(r protocol.HeartbeatResponse) []int {
	return protocol.Indexes(r.Assignment.PendingShards)
}

// client is a well-behaved member for table tests: it applies every answer
// as the status table of docs/protocol.md §6 says (see simMember).
type client struct {
	sim *simMember
	g   *Group
	cfg Config
	t   *testing.T
	// lenient skips the invariant check while a correction round is open:
	// a restored group may know of overlaps the lost state left behind.
	lenient bool
}

func newClient(t *testing.T, g *Group, id string) *client {
	c := &client{sim: newSimMember(id), g: g, cfg: testConfig(), t: t}
	// The same incarnation as hb's requests; a restart gets another one.
	c.sim.instance = "inst-" + id
	c.sim.nonce = fmt.Sprintf("%p-", c)
	return c
}

// beat sends one heartbeat at now and applies the answer.
func (c *client) beat(now time.Time) Result {
	c.t.Helper()
	req := c.sim.request()
	res := Heartbeat(c.g, req, now, c.cfg)
	if err := c.sim.apply(req, res.Response, now, c.cfg.MemberLease); err != nil {
		c.t.Fatal(err)
	}
	if v := CheckInvariants(c.g); len(v) > 0 && !(c.lenient && c.g.CorrectionOpen) {
		c.t.Fatalf("after %s's heartbeat: %v", c.sim.id, v)
	}
	return res
}

// settle lets every client heartbeat, round-robin, until a full round
// changes nothing durable and tells no client a new epoch or version (an
// epoch catch-up is not durable, yet the client acts on it), and returns
// the time reached.
func settle(t *testing.T, now time.Time, clients ...*client) time.Time {
	t.Helper()
	for round := 0; round < 50; round++ {
		changed := false
		for _, c := range clients {
			now = now.Add(10 * time.Millisecond)
			epoch, version := c.sim.epoch, c.sim.version
			if c.beat(now).Persist || c.sim.epoch != epoch || c.sim.version != version {
				changed = true
			}
		}
		if !changed {
			return now
		}
	}
	t.Fatalf("no fixed point after 50 rounds: %s", dumpGroup(clients[0].g))
	return now
}

// simMember models a member process exactly as the status table of docs/protocol.md §6
// says a client behaves:
//
//	OK: own exactly assigned (start new, revoke missing);
//	SYNC_METADATA, REVOKE_PENDING: keep owned ∩ assigned, revoke the rest,
//	  start nothing;
//	RETRY: keep everything;
//	FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: drop everything at once, epoch 0.
//
// A revoked shard is reported REVOKING (still in flight) on the next
// heartbeat, REVOKED with inFlight 0 on the one after, then forgotten.
type simMember struct {
	id       string
	epoch    int64
	version  int64
	owned    []int
	revoking map[int]protocol.RevokeState
	leaving  bool // sent or sending epoch -1
	// stuck: revocations never finish (a JVM leaver drains until its lease
	// ends and never heartbeats again).
	stuck bool
	seq   int
	// retryID, when set, is the requestId of the next request: the
	// transport failed, so the request may have reached the coordinator,
	// and its retry carries the same id (as our member runtime does).
	retryID string
	// instance is sent as instanceId ("" = a reference client); nonce
	// makes this process's request ids unique, as real clients' are.
	instance, nonce string
}

func newSimMember(id string) *simMember {
	return &simMember{id: id, revoking: map[int]protocol.RevokeState{}}
}

// reading is every shard the process may be consuming right now: owned ones
// and those still draining.
func (s *simMember) reading() []int {
	out := slices.Clone(s.owned)
	for sh, st := range s.revoking {
		if st != protocol.RevokeRevoked {
			out = append(out, sh)
		}
	}
	return normalize(out)
}

func (s *simMember) request() *protocol.HeartbeatRequest {
	s.seq++
	epoch := s.epoch
	owned := s.owned
	if s.leaving {
		epoch = protocol.EpochLeave
		owned = nil
	}
	req := hb(s.id, epoch, s.version, owned)
	req.RequestID = fmt.Sprintf("%s-%s%d", s.id, s.nonce, s.seq)
	if s.retryID != "" {
		req.RequestID, s.retryID = s.retryID, ""
	}
	req.InstanceID = s.instance
	if s.instance != "" {
		req.RequestSeq = int64(s.seq) // as our member runtime: one sequence per process
	}
	keys := make([]int, 0, len(s.revoking))
	for sh := range s.revoking {
		keys = append(keys, sh)
	}
	sort.Ints(keys)
	for _, sh := range keys {
		st := s.revoking[sh]
		inFlight := 1
		if st == protocol.RevokeRevoked {
			inFlight = 0
		}
		req.RevokingShards = append(req.RevokingShards, revokingShard(sh, st, inFlight))
	}
	for _, sh := range s.owned {
		req.ShardProgress = append(req.ShardProgress, protocol.ShardProgress{
			Shard: protocol.Shard{ShardIndex: sh}, StreamKey: protocol.StreamKey("orders", sh),
			LastDeliveredID: "1-0", LastAckedID: "1-0",
		})
	}
	return req
}

// startLeave makes the member leave: it stops reading new entries and
// drains what it owned.
func (s *simMember) startLeave() {
	for _, sh := range s.owned {
		s.revoking[sh] = protocol.RevokeDraining
	}
	s.owned = nil
	s.leaving = true
}

// drop stops every read at once (fenced, lease passed, crash).
func (s *simMember) drop() {
	s.owned = nil
	s.revoking = map[int]protocol.RevokeState{}
}

// apply applies the answer to req, received at now.
func (s *simMember) apply(req *protocol.HeartbeatRequest, resp protocol.HeartbeatResponse, now time.Time, lease time.Duration) error {
	if resp.ResponseTo != req.RequestID {
		return fmt.Errorf("%s: response to %q for request %q", s.id, resp.ResponseTo, req.RequestID)
	}
	if resp.HeartbeatIntervalMs <= 0 || resp.RebalanceTimeoutMs <= 0 {
		return fmt.Errorf("%s: non-positive interval in %+v", s.id, resp)
	}
	switch resp.Status {
	case protocol.StatusRetry:
		return nil
	case protocol.StatusFencedMemberEpoch, protocol.StatusUnknownMemberID:
		s.drop()
		s.epoch = 0
		s.leaving = false
		return nil
	case protocol.StatusInvalidRequest, protocol.StatusUnsupportedProtocol:
		return fmt.Errorf("%s: %s answered to %+v", s.id, resp.Status, req)
	}
	// The revocations the request reported progress: REVOKING/DRAINING
	// finished draining, REVOKED was acknowledged.
	for _, r := range req.RevokingShards {
		if s.stuck && !r.Terminal() {
			// Draining never finishes; a shard it had finished before it
			// got stuck is done.
			continue
		}
		sh := r.Shard.ShardIndex
		if st, ok := s.revoking[sh]; ok && st == r.State {
			if r.Terminal() {
				delete(s.revoking, sh)
			} else {
				s.revoking[sh] = protocol.RevokeRevoked
			}
		}
	}
	if s.leaving {
		if resp.Status != protocol.StatusOK || resp.MemberEpoch != protocol.EpochLeave {
			return fmt.Errorf("%s: leave answered %+v", s.id, resp)
		}
		return nil
	}
	s.epoch = resp.MemberEpoch
	s.version = resp.MetadataVersion
	got := assigned(resp)
	keep := intersect(s.owned, got)
	for _, sh := range minus(s.owned, got) {
		s.revoking[sh] = protocol.RevokeRevoking
	}
	s.owned = keep
	if resp.Status == protocol.StatusOK {
		for _, sh := range got {
			delete(s.revoking, sh) // taken back before it was released
		}
		s.owned = got
	}
	if len(intersect(s.owned, pending(resp))) > 0 {
		return fmt.Errorf("%s: owns pending shards %v", s.id, pending(resp))
	}
	return nil
}

// durable is a fingerprint of every durable field of g: a call that changes
// it must say Persist (but for an epoch catch-up, see durableButEpochs).
// Hand-rolled (no fmt) because the simulation takes one before and after
// every call.
func durable(g *Group) uint64 { return fingerprint(g, true) }

// durableButEpochs is durable without the members' epochs: an answer that
// only catches a member's epoch up is not a durable change (catchUp), so
// the simulation checks epochs apart (see epochsOf).
func durableButEpochs(g *Group) uint64 { return fingerprint(g, false) }

func fingerprint(g *Group, epochs bool) uint64 {
	b := make([]byte, 0, 1024)
	num := func(v int64) { b = binary.LittleEndian.AppendUint64(b, uint64(v)) }
	str := func(s string) {
		num(int64(len(s)))
		b = append(b, s...)
	}
	set := func(s []int) {
		num(int64(len(s)))
		for _, x := range s {
			num(int64(x))
		}
	}
	when := func(t time.Time) {
		if t.IsZero() {
			num(0)
			return
		}
		num(t.UnixNano())
	}
	str(string(g.State))
	num(g.GroupEpoch)
	num(g.AssignmentEpoch)
	num(g.MetadataVersion)
	num(int64(g.ShardCount))
	set(g.DrainingShards)
	if g.CorrectionOpen {
		num(1)
	}
	if m := g.ActiveMigration; m != nil {
		str(m.ReshardingID)
		str(string(m.State))
	}
	for _, id := range sortedIDs(g.Members) {
		m := g.Members[id]
		str(id)
		str(m.Name)
		str(string(m.State))
		if epochs {
			num(m.Epoch)
			num(m.PreviousEpoch)
		}
		set(m.Current)
		set(m.Revoking)
		set(m.Granted)
		num(int64(len(m.Withdrawn)))
		for _, w := range m.Withdrawn {
			num(int64(w.Shard))
			num(w.Version)
		}
		num(m.JoinVersion)
		if m.Reported {
			num(1)
		}
		when(m.JoinedAt)
		when(m.RebalanceDeadline)
		when(m.StateChangedAt)
		str(m.InstanceID)
		str(m.JoinRequestID)
	}
	for _, e := range g.OwnerEpochs {
		num(e)
	}
	ids := make([]string, 0, len(g.Target))
	for id := range g.Target {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		str(id)
		set(g.Target[id])
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func dumpGroup(g *Group) string {
	raw, _ := json.MarshalIndent(struct {
		G *Group
		A protocol.AssignmentsResponse
		M []protocol.Member
	}{g, g.Assignments(), g.MemberViews(testConfig())}, "", " ")
	return string(raw)
}

// recordParts is a fingerprint of each durable part of g as [Changes]
// names them: the group-level part, each member's part (its durable fields
// and its target) and each shard's owner epoch.
type recordParts struct {
	group   string
	members map[string]string
	owners  []int64
}

func partsOf(g *Group) recordParts { return partsWith(g, true) }

// partsWith is partsOf, with or without the members' epochs.
func partsWith(g *Group, epochs bool) recordParts {
	p := recordParts{members: map[string]string{}, owners: slices.Clone(g.OwnerEpochs)}
	mig := ""
	if m := g.ActiveMigration; m != nil {
		mig = m.ReshardingID + "/" + string(m.State)
	}
	p.group = fmt.Sprint(g.State, g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion, g.ShardCount, g.DrainingShards, g.CorrectionOpen, mig, g.CreatedAt.UnixNano())
	for id, m := range g.Members {
		e := []int64{m.Epoch, m.PreviousEpoch}
		if !epochs {
			e = nil
		}
		p.members[id] = fmt.Sprint(m.Name, m.State, e, m.Current, m.Revoking, m.Granted, m.Withdrawn, m.JoinVersion, m.Reported,
			m.JoinedAt.UnixNano(), m.RebalanceDeadline.UnixNano(), m.StateChangedAt.UnixNano(), m.InstanceID, m.JoinRequestID, g.Target[id])
	}
	return p
}

// checkChanges reports every durable part that changed from before to
// after without being listed in c, and listings that are impossible.
func checkChanges(before, after recordParts, c Changes) []string {
	var out []string
	if before.group != after.group && !c.Group {
		out = append(out, "group-level part changed, not listed")
	}
	for id, f := range after.members {
		if before.members[id] != f && !slices.Contains(c.Members, id) {
			out = append(out, fmt.Sprintf("member %s changed, not listed", id))
		}
	}
	for id := range before.members {
		if _, ok := after.members[id]; !ok && !slices.Contains(c.Removed, id) {
			out = append(out, fmt.Sprintf("member %s removed, not listed", id))
		}
	}
	for _, id := range c.Removed {
		if _, ok := after.members[id]; ok {
			out = append(out, fmt.Sprintf("member %s listed as removed but present", id))
		}
	}
	for s := range max(len(before.owners), len(after.owners)) {
		var b, a int64
		if s < len(before.owners) {
			b = before.owners[s]
		}
		if s < len(after.owners) {
			a = after.owners[s]
		}
		if a < b {
			out = append(out, fmt.Sprintf("owner epoch of shard %d went back %d→%d", s, b, a))
		}
		if a != b && !slices.Contains(c.OwnerEpochs, s) {
			out = append(out, fmt.Sprintf("owner epoch of shard %d changed, not listed", s))
		}
	}
	return out
}

// epochsOf is every member's epoch and previous epoch.
func epochsOf(g *Group) map[string][2]int64 {
	out := make(map[string][2]int64, len(g.Members))
	for id, m := range g.Members {
		out[id] = [2]int64{m.Epoch, m.PreviousEpoch}
	}
	return out
}

// checkCatchUps reports every member whose epochs changed from before
// without being listed in c, unless the change is an epoch catch-up: the
// member is live and its epoch rose to the group's assignment epoch.
func checkCatchUps(g *Group, before map[string][2]int64, c Changes) []string {
	var out []string
	for id, m := range g.Members {
		b, ok := before[id]
		if !ok || b == [2]int64{m.Epoch, m.PreviousEpoch} || slices.Contains(c.Members, id) {
			continue
		}
		if !m.State.Live() || m.Epoch != g.AssignmentEpoch || m.Epoch < b[0] {
			out = append(out, fmt.Sprintf("member %s epochs %v → %d/%d (%s, assignment epoch %d) not listed and no catch-up",
				id, b, m.Epoch, m.PreviousEpoch, m.State, g.AssignmentEpoch))
		}
	}
	return out
}
