package assign

import (
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// The simulation's checks: safety after every call, convergence at the end
// (see sim_test.go).

func checkNoNullsQuiet(w *world, r protocol.HeartbeatResponse) {
	if r.Assignment.AssignedShards == nil || r.Assignment.PendingShards == nil {
		w.fail("nil array in %+v", r)
	}
}

func (w *world) checkEpochs() {
	g := w.g
	if g.GroupEpoch < w.groupEpoch || g.AssignmentEpoch < w.assignmentEpoch || g.MetadataVersion < w.version {
		w.fail("epochs went back: %d/%d/%d after %d/%d/%d", g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion,
			w.groupEpoch, w.assignmentEpoch, w.version)
	}
	w.groupEpoch, w.assignmentEpoch, w.version = g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion
	for id := range w.epochs {
		if g.Members[id] == nil {
			delete(w.epochs, id) // pruned: a new member may start over
		}
	}
	for id, m := range g.Members {
		if m.Epoch < w.epochs[id] {
			w.fail("member %s epoch went back from %d to %d", id, w.epochs[id], m.Epoch)
		}
		w.epochs[id] = m.Epoch
	}
}

// check runs the safety checks after every call.
func (w *world) check() {
	g := w.g
	murky := w.murky()
	if v := CheckInvariants(g); len(v) > 0 && !murky {
		w.fail("invariants: %v", v)
	}
	if d := indexMismatch(g); d != "" {
		w.fail("index: %s", d)
	}
	reader := map[int]string{}
	for _, id := range sortedProcs(w.procs) {
		p := w.procs[id]
		reading := p.reading()
		for _, s := range reading {
			if o, ok := reader[s]; ok {
				w.fail("shard %d read by %s and %s at once", s, o, id)
			}
			reader[s] = id
		}
		if len(reading) == 0 || murky {
			continue
		}
		m := g.Members[p.id]
		if m == nil {
			w.fail("%s reads %v but the group does not know it", id, reading)
			continue
		}
		if !subset(reading, union(union(m.Current, m.Revoking), m.Granted)) {
			w.fail("%s reads %v beyond what the group knows it holds (%v %v %v)", id, reading, m.Current, m.Revoking, m.Granted)
		}
	}
	for id, m := range g.Members {
		for _, s := range m.Granted {
			if o, ok := reader[s]; ok && w.procs[o].id != id && !murky {
				w.fail("shard %d granted to %s while %s reads it", s, id, o)
			}
		}
	}
}

// converge stops the chaos and lets everything settle: leavers drain, hung
// processes' leases end and they expire, survivors reach a fixed point.
func (w *world) converge() {
	start := w.now
	for i := 0; i < 20000 && !w.failed; i++ {
		if w.now.Sub(start) > w.cfg.MemberLease+10*time.Second && w.settled() {
			break
		}
		if w.now.Sub(start) > 5*time.Minute {
			w.fail("no convergence after 5 minutes")
			return
		}
		w.step()
	}
	if w.failed {
		return
	}
	if !w.settled() {
		w.fail("not settled")
		return
	}
	g := w.g
	ups := map[string]bool{}
	for _, p := range w.procs {
		if p.up {
			ups[p.id] = true
		}
	}
	live := len(ups)
	if g.LiveMembers() != live {
		w.fail("%d live members in the group, %d processes up", g.LiveMembers(), live)
	}
	if live == 0 {
		if g.State != protocol.GroupEmpty {
			w.fail("state %s without members", g.State)
		}
		return
	}
	lo, hi, total := 1<<30, -1, 0
	for _, t := range g.Target {
		lo, hi, total = min(lo, len(t)), max(hi, len(t)), total+len(t)
	}
	if hi-lo > 1 {
		w.fail("spread %d after convergence", hi-lo)
	}
	if total != len(readableShards(g)) {
		w.fail("%d of %d readable shards assigned", total, len(readableShards(g)))
	}
}

// settled: the group is STABLE, every process up reads exactly its target
// and nothing else is held anywhere.
func (w *world) settled() bool {
	g := w.g
	if g.LiveMembers() > 0 && g.State != protocol.GroupStable {
		return false
	}
	for _, p := range w.procs {
		if p.up && (p.leaving || len(p.revoking) > 0 || !equalSets(p.owned, g.Target[p.id])) {
			return false
		}
		if m := g.Members[p.id]; p.up && (m == nil || !m.State.Live()) {
			return false // still waiting to rejoin
		}
		if !p.up && len(p.reading())+len(p.revoking) > 0 {
			return false
		}
	}
	for id, m := range g.Members {
		up := false
		for _, p := range w.procsOf(id) {
			up = up || p.up
		}
		if m.State.Live() && !up {
			return false
		}
	}
	return true
}
