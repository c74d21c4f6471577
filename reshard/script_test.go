package reshard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/rscoord/rscoord/client/protocol"
)

// Scripted decision tests, like assign's: each file under testdata/script
// is a list of blocks
//
//	command args
//	----
//	expected output
//
// separated by blank lines, in the format of github.com/cockroachdb/datadriven
// (lines starting with # are comments). Commands drive a stream record on a fake clock
// and print every decision. Regenerate after an intended change with
//
//	go test ./reshard -run TestScripts -rewrite
//
// and review the diff.
//
// Commands (the script acts as the stream actor: it adopts every Save):
//
//	stream shards=N [redis] [retire] [lease=D] [interval=D]   new stream at +0s, groups g1 g2
//	scale N [after=D]          operator scale (deprecatedAfter now+D)
//	provisioned [fail]         the outcome of the last decision's provisioning
//	rollback ID / complete ID  operator commands
//	check [resume]             the timer fires (facts not gathered yet)
//	gathered                   check again with the groups and shards below
//	retired [fail]             the outcome of the last decision's deletion
//	take [GROUP...]            groups take the record's layout (all when none named)
//	pushed                     every group took the record's layout, answering its push now
//	group NAME STATE           a group's state: STABLE, RECONCILING, EMPTY, ERR
//	shard N pending=P lag=L|nil [missing] [err]   drain facts of shard N
//	advance D                  the clock moves
//	crash                      the actor restarts: the next check resumes
//	state                      the record
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScripts(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata/script", func(t *testing.T, path string) {
		s := newScript()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return strings.TrimSpace(s.do(d.FullCmd())) + "\n"
		})
	})
}

// groupSim is a group as the script's stream actor sees it.
type groupSim struct {
	name       string
	shardCount int
	draining   []int
	state      string
}

type script struct {
	cfg    Config
	now    time.Time
	s      Stream
	groups []*groupSim
	shards map[int]ShardFacts
	last   Decision
	resume bool
	// routed is what the actor remembers of Decision.RoutedSince (or of
	// a layout push every group took): the count and since when.
	routed struct {
		count int
		since time.Time
	}
}

func newScript() *script {
	return &script{now: t0, shards: map[int]ShardFacts{}}
}

func (sc *script) do(block string) string {
	var cmd []string
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "#") {
			cmd = strings.Fields(l)
		}
	}
	if len(cmd) == 0 {
		return "no command"
	}
	opts := map[string]string{}
	for _, a := range cmd[1:] {
		k, v, _ := strings.Cut(a, "=")
		opts[k] = v
	}
	has := func(k string) bool { _, ok := opts[k]; return ok }
	dur := func(k string, def time.Duration) time.Duration {
		if v, ok := opts[k]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				panic(err)
			}
			return d
		}
		return def
	}
	switch cmd[0] {
	case "stream":
		n, _ := strconv.Atoi(opts["shards"])
		sc.cfg = Config{Redis: has("redis"), RetireRemoved: has("retire"),
			RoutingLease: dur("lease", 60*time.Second), CheckInterval: dur("interval", 5*time.Second)}
		sc.s = Stream{Prefix: "orders", ShardCount: n, Draining: []int{}, MetadataVersion: 1}
		sc.groups = []*groupSim{{name: "g1", shardCount: n, draining: []int{}, state: "STABLE"},
			{name: "g2", shardCount: n, draining: []int{}, state: "STABLE"}}
		return sc.record()
	case "scale":
		n, _ := strconv.Atoi(cmd[1])
		req := Request{RequestedBy: "ops", Reason: "test"}
		if has("after") {
			req.DeprecatedAfter = sc.now.Add(dur("after", 0))
		}
		return sc.apply(Scale(sc.s, n, req, sc.now, sc.cfg))
	case "provisioned":
		var err error
		if len(cmd) > 1 && cmd[1] == "fail" {
			err = errors.New("redis: connection refused")
		}
		id := ""
		if sc.last.Migration != nil {
			id = sc.last.Migration.ReshardingID
		}
		return sc.apply(Provisioned(sc.s, id, err, sc.now, sc.cfg))
	case "rollback":
		return sc.apply(Rollback(sc.s, cmd[1], "ops", "test", sc.now, sc.cfg))
	case "complete":
		return sc.apply(Complete(sc.s, cmd[1], "ops", "stuck", sc.now, sc.cfg))
	case "check":
		resume := sc.resume
		sc.resume = false
		return sc.apply(Check(sc.s, sc.withRouted(Facts{Now: sc.now, Resume: resume}), sc.cfg))
	case "gathered":
		return sc.apply(Check(sc.s, sc.withRouted(sc.facts()), sc.cfg))
	case "pushed":
		for _, g := range sc.groups {
			g.shardCount, g.draining = sc.s.ShardCount, slices.Clone(sc.s.Draining)
		}
		sc.routed.count, sc.routed.since = sc.s.ShardCount, sc.now
		return sc.groupsLine() + fmt.Sprintf("\nrouted shards=%d since +%v", sc.routed.count, sc.now.Sub(t0))
	case "retired":
		var err error
		if len(cmd) > 1 && cmd[1] == "fail" {
			err = errors.New("redis: timeout")
		}
		return sc.apply(Retired(sc.s, err, sc.now, sc.cfg))
	case "take":
		for _, g := range sc.groups {
			if len(cmd) == 1 || slices.Contains(cmd[1:], g.name) {
				g.shardCount, g.draining = sc.s.ShardCount, slices.Clone(sc.s.Draining)
			}
		}
		return sc.groupsLine()
	case "group":
		for _, g := range sc.groups {
			if g.name == cmd[1] {
				g.state = cmd[2]
			}
		}
		return sc.groupsLine()
	case "shard":
		n, _ := strconv.Atoi(cmd[1])
		f := ShardFacts{Shard: n, Key: protocol.StreamKey("orders", n), Exists: !has("missing")}
		if has("err") {
			f.Err = errors.New("redis: timeout")
		}
		p, _ := strconv.ParseInt(opts["pending"], 10, 64)
		gl := GroupLag{Name: "g1", Pending: p}
		if v := opts["lag"]; v != "nil" {
			l, _ := strconv.ParseInt(v, 10, 64)
			gl.Lag = &l
		}
		f.Groups = []GroupLag{gl}
		sc.shards[n] = f
		ok, why := Proof(f)
		return fmt.Sprintf("shard %d proven=%v %s", n, ok, why)
	case "advance":
		d, err := time.ParseDuration(cmd[1])
		if err != nil {
			return "bad duration: " + err.Error()
		}
		sc.now = sc.now.Add(d)
		return "now +" + sc.now.Sub(t0).String()
	case "crash":
		sc.resume = true
		sc.last = Decision{}
		sc.routed.count, sc.routed.since = 0, time.Time{}
		return "restarted from the record"
	case "state":
		return sc.record()
	}
	return "unknown command " + cmd[0]
}

func (sc *script) facts() Facts {
	f := Facts{Now: sc.now, Gathered: true}
	for _, g := range sc.groups {
		gf := GroupFacts{Name: g.name, ShardCount: g.shardCount, Draining: g.draining, State: g.state,
			Converged: g.state == "STABLE" || g.state == "EMPTY"}
		if g.state == "ERR" {
			gf.Err = errors.New("store unavailable")
		}
		f.Groups = append(f.Groups, gf)
	}
	for _, shard := range sc.s.Draining {
		if sf, ok := sc.shards[shard]; ok {
			f.Shards = append(f.Shards, sf)
		}
	}
	return f
}

// withRouted adds what the actor remembers of the routing's start.
func (sc *script) withRouted(f Facts) Facts {
	if sc.routed.count == sc.s.ShardCount {
		f.RoutedSince = sc.routed.since
	}
	return f
}

// apply adopts the decision's record and prints the decision.
func (sc *script) apply(d Decision) string {
	sc.last = d
	var b strings.Builder
	if d.Err != nil {
		var perr *protocol.Error
		code := ""
		if errors.As(d.Err, &perr) {
			code = string(perr.Code) + " "
		}
		fmt.Fprintf(&b, "error %s%v\n", code, d.Err)
	}
	if d.Save != nil {
		sc.s = *d.Save
		b.WriteString("save " + sc.record() + "\n")
	}
	if d.Layout != nil {
		to := "all"
		if d.LayoutTo != nil {
			to = strings.Join(d.LayoutTo, ",")
		}
		active := "none"
		if d.Layout.Active != nil {
			active = d.Layout.Active.ReshardingID + ":" + string(d.Layout.Active.State)
		}
		fmt.Fprintf(&b, "layout to=%s shards=%d draining=%v active=%s\n", to, d.Layout.ShardCount, d.Layout.Draining, active)
	}
	if d.ProvisionNeeded {
		fmt.Fprintf(&b, "provision %v\n", d.Provision)
	}
	if d.Gather != nil {
		fmt.Fprintf(&b, "gather groups=%v shards=%v\n", d.Gather.Groups, d.Gather.Shards)
	}
	if d.Delete != nil {
		fmt.Fprintf(&b, "delete %v then-retire=%v\n", d.Delete, d.DeleteThenRetire)
	}
	if !d.RoutedSince.IsZero() && (sc.routed.count != sc.s.ShardCount || !sc.routed.since.Equal(d.RoutedSince)) {
		sc.routed.count, sc.routed.since = sc.s.ShardCount, d.RoutedSince
		fmt.Fprintf(&b, "routed shards=%d since +%v\n", sc.routed.count, d.RoutedSince.Sub(t0))
	}
	if !d.CheckAt.IsZero() {
		fmt.Fprintf(&b, "check at +%v\n", d.CheckAt.Sub(t0))
	}
	if d.Waiting != "" {
		fmt.Fprintf(&b, "waiting: %s\n", d.Waiting)
	}
	if d.Migration != nil {
		fmt.Fprintf(&b, "answer %s\n", migrationLine(*d.Migration))
	}
	if b.Len() == 0 {
		return "nothing to do"
	}
	if err := checkInvariants(sc.s); err != nil {
		fmt.Fprintf(&b, "INVARIANT VIOLATED: %v\n", err)
	}
	return b.String()
}

func (sc *script) record() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stream shards=%d draining=%v version=%d", sc.s.ShardCount, sc.s.Draining, sc.s.MetadataVersion)
	for _, m := range sc.s.Migrations {
		b.WriteString("\n  " + migrationLine(m))
	}
	return b.String()
}

func migrationLine(m Migration) string {
	line := fmt.Sprintf("%s %d→%d %s retired=%v", m.ReshardingID, m.FromShardCount, m.ToShardCount, m.State, m.RetiredShards)
	if !m.ActivatedAt.IsZero() {
		line += fmt.Sprintf(" activated=+%v", m.ActivatedAt.Sub(t0))
	}
	if m.Note != "" {
		line += " note=" + strconv.Quote(m.Note)
	}
	return line
}

func (sc *script) groupsLine() string {
	var parts []string
	for _, g := range sc.groups {
		parts = append(parts, fmt.Sprintf("%s shards=%d draining=%v %s", g.name, g.shardCount, g.draining, g.state))
	}
	return strings.Join(parts, "\n")
}
