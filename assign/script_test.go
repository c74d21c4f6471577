package assign

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/rscoord/rscoord/client/protocol"
)

// Scripted decision tests (facts in, decisions out, as in raft's interaction tests): each file
// under testdata/script is a list of blocks
//
//	command args
//	----
//	expected output
//
// separated by blank lines, in the format of github.com/cockroachdb/datadriven
// (lines starting with # are comments). Commands drive a group and well-behaved clients
// on a fake clock and print every decision, so a change in behaviour shows
// up as a readable diff. Regenerate after an intended change with
//
//	go test ./assign -run TestScripts -rewrite
//
// and review the diff.
//
// Commands:
//
//	group shards=N             new group at +0s
//	join ID                    new client ID heartbeats (epoch 0)
//	beat ID [lose]             client heartbeats; lose: the answer is lost
//	restart ID                 a new process for ID (owns nothing, epoch 0)
//	client ID                  a process that has not heartbeated yet
//	leave ID                   client leaves: drains what it owns, heartbeats -1
//	report ID owned=1,2 epoch=N version=N   client's view is overwritten (a lost state)
//	advance DURATION           the clock moves
//	tick                       the actor's timer fires
//	layout N [draining=5,6]    SetLayout
//	hold [1,2]                 HoldOut: hold these shards out of the
//	                           assignment (none: clear the hold)
//	state                      group and members
//	stored                     the members' epochs as the store holds them
//	send ID as=NAME            client builds a heartbeat that is held up in
//	                           the network: its transport fails, so its
//	                           next heartbeat retries the same requestId
//	deliver NAME               the held-up request reaches the coordinator
//	                           late; its answer reaches nobody
//	crash                      the coordinator dies and starts again: the
//	                           group is loaded from what the calls wrote
//	                           (part by part, as Changes name them) and
//	                           restored; clients keep what they were told
func TestScripts(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata/script", func(t *testing.T, path string) {
		s := &script{t: t, cfg: testConfig(), now: t0, clients: map[string]*client{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return strings.TrimSpace(s.do(d.FullCmd())) + "\n"
		})
	})
}

type script struct {
	t       *testing.T
	cfg     Config
	now     time.Time
	g       *Group
	clients map[string]*client
	// store is what the coordinator wrote (see simStore).
	store *simStore
	// network holds requests held up by send, by name.
	network map[string]*protocol.HeartbeatRequest
}

func (s *script) do(line string) string {
	var cmd []string
	for _, l := range strings.Split(line, "\n") {
		if !strings.HasPrefix(l, "#") {
			cmd = strings.Fields(l)
		}
	}
	if len(cmd) == 0 {
		return "no command"
	}
	arg := func(i int) string {
		if i < len(cmd) {
			return cmd[i]
		}
		s.t.Fatalf("%s: missing argument %d", line, i)
		return ""
	}
	kv := map[string]string{}
	for _, f := range cmd[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		}
	}
	switch cmd[0] {
	case "group":
		n, _ := strconv.Atoi(kv["shards"])
		s.g = NewGroup("orders", "billing", n, s.now)
		s.store = newSimStore(s.g)
		return s.state()
	case "join":
		c := newClient(s.t, s.g, arg(1))
		s.clients[arg(1)] = c
		return s.beat(c, false)
	case "beat":
		if len(cmd) > 2 && cmd[2] == "refused" {
			// An answer the member does not apply: it stops (INVALID_REQUEST).
			return strings.Replace(s.beat(s.client(arg(1)), true), "(answer lost)", "(refused: the member stops)", 1)
		}
		return s.beat(s.client(arg(1)), len(cmd) > 2 && cmd[2] == "lose")
	case "send":
		c := s.client(arg(1))
		req := c.sim.request()
		c.sim.retryID = req.RequestID
		if s.network == nil {
			s.network = map[string]*protocol.HeartbeatRequest{}
		}
		s.network[kv["as"]] = req
		return fmt.Sprintf("%s sends e%d owned=%v: held up in the network", c.sim.id, req.MemberEpoch, protocol.Indexes(req.OwnedShards))
	case "deliver":
		req, ok := s.network[arg(1)]
		if !ok {
			s.t.Fatalf("%s: nothing named %s in the network", line, arg(1))
		}
		delete(s.network, arg(1))
		res := s.written(Heartbeat(s.g, req, s.now, s.cfg))
		r := res.Response
		return fmt.Sprintf("late %s e%d owned=%v → %s e%d assigned=%v pending=%v (to nobody)%s", req.MemberID, req.MemberEpoch,
			protocol.Indexes(req.OwnedShards), r.Status, r.MemberEpoch, assigned(r), pending(r), flags(res)) + "\n" + s.state()
	case "client":
		s.clients[arg(1)] = newClient(s.t, s.g, arg(1))
		return "client " + arg(1) + " never joined"
	case "restart":
		c := newClient(s.t, s.g, arg(1))
		c.sim.instance += "-restarted"
		s.clients[arg(1)] = c
		return c.sim.id + " restarts: owns nothing, epoch 0"
	case "leave":
		c := s.client(arg(1))
		c.sim.startLeave()
		return s.beat(c, false)
	case "report":
		c := s.client(arg(1))
		c.lenient = true
		if v, ok := kv["owned"]; ok {
			c.sim.owned = parseShards(v)
		}
		if v, ok := kv["epoch"]; ok {
			c.sim.epoch, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := kv["version"]; ok {
			c.sim.version, _ = strconv.ParseInt(v, 10, 64)
		}
		return fmt.Sprintf("%s now reports epoch %d version %d owned %v", c.sim.id, c.sim.epoch, c.sim.version, c.sim.owned)
	case "advance":
		d, err := time.ParseDuration(arg(1))
		if err != nil {
			s.t.Fatal(err)
		}
		s.now = s.now.Add(d)
		return "now +" + s.now.Sub(t0).String()
	case "tick":
		return s.result("tick", s.written(Tick(s.g, s.now, s.cfg)))
	case "layout":
		n, _ := strconv.Atoi(arg(1))
		res := SetLayout(s.g, n, parseShards(kv["draining"]), s.now, s.cfg)
		s.store.writeAll(s.g) // the actor writes every member on a layout change
		return s.result("layout", res) + "\n" + s.state()
	case "hold":
		var shards []int
		if len(cmd) > 1 {
			shards = parseShards(arg(1))
		}
		res := s.written(HoldOut(s.g, shards, s.now, s.cfg))
		return s.result(fmt.Sprintf("hold %v", s.g.HeldOut()), res) + "\n" + s.state()
	case "state":
		return s.state()
	case "stored":
		var b strings.Builder
		b.WriteString("stored")
		for _, id := range sortedIDs(s.store.load().Members) {
			m := s.store.members[id]
			fmt.Fprintf(&b, "\n  %s %s e%d/%d", id, m.State, m.Epoch, m.PreviousEpoch)
		}
		return b.String()
	case "crash":
		s.g = s.store.load()
		for _, c := range s.clients {
			c.g = s.g
		}
		return s.result("coordinator restarts from the store; restore", s.written(Restore(s.g, s.now, s.cfg))) + "\n" + s.state()
	}
	s.t.Fatalf("unknown command %q", line)
	return ""
}

func (s *script) client(id string) *client {
	c, ok := s.clients[id]
	if !ok {
		s.t.Fatalf("no client %s", id)
	}
	return c
}

func parseShards(v string) []int {
	var out []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func (s *script) beat(c *client, lose bool) string {
	req := c.sim.request()
	res := s.written(Heartbeat(s.g, req, s.now, s.cfg))
	r := res.Response
	var b strings.Builder
	fmt.Fprintf(&b, "%s e%d v%d owned=%v revoking=%s → %s e%d v%d assigned=%v pending=%v every %s",
		c.sim.id, req.MemberEpoch, req.MetadataVersion, protocol.Indexes(req.OwnedShards), revokingText(req.RevokingShards),
		r.Status, r.MemberEpoch, r.MetadataVersion, assigned(r), pending(r), time.Duration(r.HeartbeatIntervalMs)*time.Millisecond)
	b.WriteString(flags(res))
	if lose {
		b.WriteString("\n  (answer lost)")
		return b.String()
	}
	if err := c.sim.apply(req, r, s.now, s.cfg.MemberLease); err != nil {
		s.t.Fatal(err)
	}
	if v := CheckInvariants(s.g); len(v) > 0 && !(c.lenient && s.g.CorrectionOpen) {
		s.t.Fatalf("invariants after %s: %v", c.sim.id, v)
	}
	return b.String()
}

func revokingText(rs []protocol.RevokingShard) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d:%s/%d", r.Shard.ShardIndex, r.State, r.InFlight))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// written writes what res says changed to the store, as the group actor
// does before it answers.
func (s *script) written(res Result) Result {
	if res.Persist {
		if back := s.store.write(s.g, res.Changes); len(back) > 0 {
			s.t.Errorf("stored epoch of %v went back", back)
		}
	}
	return res
}

func (s *script) result(what string, res Result) string {
	return what + flags(res)
}

// flags prints what a result asks of the actor.
func flags(res Result) string {
	var b strings.Builder
	if res.Persist {
		b.WriteString(" persist")
	}
	ev := res.Events
	for _, l := range []struct {
		name string
		ids  []string
	}{{"joined", ev.Joined}, {"left", ev.Left}, {"expired", ev.Expired}, {"fenced", ev.Fenced}, {"pruned", ev.Pruned}} {
		if len(l.ids) > 0 {
			fmt.Fprintf(&b, " %s=%v", l.name, l.ids)
		}
	}
	if ev.Rebalanced {
		b.WriteString(" rebalanced")
	}
	if ev.DuplicateMember {
		b.WriteString(" duplicate")
	}
	if ev.PreviousEpochAccepted {
		b.WriteString(" previous-epoch")
	}
	if ev.ForgottenEpochAccepted {
		b.WriteString(" forgotten-epoch")
	}
	if ev.LostEpoch {
		b.WriteString(" lost-epoch")
	}
	if !res.Next.IsZero() {
		fmt.Fprintf(&b, " next=+%s", res.Next.Sub(t0))
	}
	return b.String()
}

func (s *script) state() string {
	g := s.g
	var b strings.Builder
	fmt.Fprintf(&b, "group %s epoch=%d assignment=%d version=%d shards=%d draining=%v correction=%v",
		g.State, g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion, g.ShardCount, g.DrainingShards, g.CorrectionOpen)
	if len(g.heldOut) > 0 {
		fmt.Fprintf(&b, " held=%v", g.heldOut)
	}
	for _, id := range sortedIDs(g.Members) {
		m := g.Members[id]
		fmt.Fprintf(&b, "\n  %s %s e%d/%d target=%v current=%v revoking=%v granted=%v", id, m.State, m.Epoch, m.PreviousEpoch,
			g.Target[id], m.Current, m.Revoking, m.Granted)
		if !m.RebalanceDeadline.IsZero() {
			fmt.Fprintf(&b, " deadline=+%s", m.RebalanceDeadline.Sub(t0))
		}
	}
	if v := CheckInvariants(g); len(v) > 0 {
		fmt.Fprintf(&b, "\n  violations: %v", v)
	}
	return b.String()
}
