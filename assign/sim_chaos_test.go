package assign

import (
	"fmt"
	"slices"
	"time"
)

// The simulation's chaos events: layout changes, coordinator restarts and
// stores that went back (see sim_test.go).

// chaos applies one random event.
func (w *world) chaos() {
	switch w.rng.IntN(16) {
	case 0, 1:
		if len(w.procs) < 10 {
			w.join()
		}
	case 2:
		if p := w.pick(func(p *proc) bool { return p.up && !p.leaving && p.epoch > 0 }); p != nil {
			p.jvm = w.rng.IntN(2) == 0
			p.stuck = p.jvm
			if w.rng.IntN(3) == 0 {
				// It finished its in-flight work first: the leave
				// lists nothing.
				p.drop()
			}
			p.startLeave()
			p.due = w.now
			w.logf("%s leaves (jvm %v)", p.id, p.jvm)
			w.count(map[bool]string{true: "leave-jvm", false: "leave"}[p.jvm])
		}
	case 3:
		if p := w.pick(func(p *proc) bool { return p.up }); p != nil {
			p.up = false
			p.drop()
			w.logf("%s crashes", p.id)
			w.count("crash")
		}
	case 4:
		if p := w.pick(func(p *proc) bool { return p.up && !p.leaving }); p != nil {
			p.up = false
			p.hung = true
			w.logf("%s hangs holding %v", p.id, p.reading())
			w.count("hang")
		}
	case 5:
		// Only a dead process restarts: a hung one may still be reading,
		// and two live processes under one id is a misconfiguration no
		// coordinator can make safe.
		if p := w.pick(func(p *proc) bool {
			return !p.up && !p.dup && len(p.reading()) == 0 && len(p.revoking) == 0 && !w.anyUp(p.id)
		}); p != nil {
			w.procs[p.id] = w.newProc(p.id)
			w.logf("%s restarts", p.id)
			w.count("restart")
		}
	case 6:
		if p := w.pick(func(p *proc) bool { return p.up }); p != nil {
			p.loseNext = true
			w.count("lost")
		}
	case 7, 8:
		w.layout()
	case 9:
		// A second process with a live member's id (two pods with one
		// name): it must get RETRY, never a grant, while the first lives.
		if p := w.pick(func(p *proc) bool { return p.up && !p.dup && !p.leaving && p.epoch > 0 }); p != nil {
			d := w.newProc(p.id)
			d.dup, d.retries, d.timely = true, 20, false
			if p.instance == "" && d.instance == "" {
				// Two reference clients under one id are told apart on
				// joins (requestId) but not on a leave: one's leave would
				// end the other's membership. Not modelled (see
				// docs/protocol-notes.md).
				d.instance = fmt.Sprintf("inst-%d", w.incarnations)
			}
			key := fmt.Sprintf("%s#%d", p.id, w.incarnations)
			w.procs[key] = d
			w.logf("%s: a second process %s starts (instance %q)", p.id, key, d.instance)
			w.count("duplicate-process")
		}
	case 10:
		// Alive but slow to release: revocations never finish, so the
		// member is fenced at its deadline, and its shards must stay
		// unread by others until it rejoins or its lease lapses.
		if p := w.pick(func(p *proc) bool { return p.up && !p.leaving && !p.dup && !p.stuck }); p != nil {
			p.stuck, p.timely = true, false
			w.logf("%s stops releasing shards", p.id)
			w.count("slow-release")
		}
	case 11:
		// A member that never hears an answer for a while.
		if p := w.pick(func(p *proc) bool { return p.up && !p.leaving && !p.dup && p.deaf == 0 }); p != nil {
			p.deaf, p.timely = 3+w.rng.IntN(20), false
			w.logf("%s hears no answer for %d heartbeats", p.id, p.deaf)
			w.count("deaf")
		}
	case 12:
		w.coordinatorRestart()
	case 13:
		// A request held up in the network, retried, and delivered late
		// (deliverLate).
		if p := w.pick(func(p *proc) bool { return p.up && !p.delayNext }); p != nil {
			p.delayNext = true
			w.count("delayed")
		}
	case 14:
		if simStoreGoesBack {
			w.storeWentBack()
		}
	case 15:
		// A copy of a heartbeat that was delivered and answered, delivered
		// a second time, late (a network that duplicates). It carries the
		// metadata version its sender had then, whatever the coordinator
		// has issued since. Joins are copied too: an earlier join attempt
		// of the same instanceId, decided after a coordinator restart
		// forgot the last requestSeq, must not rejoin the member (its
		// durable JoinSeq refuses it).
		if p := w.pick(func(p *proc) bool { return len(p.sent) > 0 }); p != nil {
			q := *p.sent[w.rng.IntN(len(p.sent))]
			at := w.now.Add(time.Duration(1+w.rng.IntN(5000)) * time.Millisecond)
			w.network = append(w.network, late{key: p.id, req: &q, at: at})
			// Decided, an old epoch's copy may fence its member (a known
			// cost of a late copy, docs/protocol.md §9.2).
			p.timely = false
			w.logf("%s: a copy of request %s e%d v%d owns %v delivered again at +%s", p.id, q.RequestID, q.MemberEpoch,
				q.MetadataVersion, q.OwnedShards, at.Sub(t0))
			w.count("duplicated")
		}
	}
}

// storeWentBack restarts the coordinator on a store that lost its last
// writes (a restore from an older snapshot, a lost write-ahead-log tail):
// the group is loaded from one of the last snapshots and restored. The
// processes carry on with what they were answered, possibly versions and
// epochs the loaded group never issued, and requests still in the network
// carry them too.
func (w *world) storeWentBack() {
	if len(w.snaps) < 2 {
		return
	}
	// Serving stopped for at least a member lease: every process failed
	// closed. (A restart on a store that went back that is served again
	// sooner is not covered: a process the lost writes let read, that has
	// not reported since, reads what the loaded group may grant at once.)
	w.now = w.now.Add(w.cfg.MemberLease)
	for _, p := range w.procs {
		if len(p.owned)+len(p.revoking) > 0 {
			p.drop()
		}
	}
	back := 1 + w.rng.IntN(len(w.snaps)-1)
	snap := w.snaps[len(w.snaps)-1-back]
	w.snaps = w.snaps[:len(w.snaps)-back]
	w.store = snap.clone()
	w.g = w.store.load()
	w.durable = durableButEpochs(w.g)
	// What the history checks remember went back with the store.
	w.groupEpoch, w.assignmentEpoch, w.version = w.g.GroupEpoch, w.g.AssignmentEpoch, w.g.MetadataVersion
	w.epochs = map[string]int64{}
	for id, m := range w.g.Members {
		w.epochs[id] = m.Epoch
	}
	// A process the lost writes answered may be fenced or forgotten now:
	// that is the price of a store that went back, not a fault.
	for _, p := range w.procs {
		p.timely = false
	}
	w.wentBack = w.now
	w.logf("the store went back %d writes, to version %d", back, w.g.MetadataVersion)
	w.count("store-went-back")
	w.call("restore", func() Result { return Restore(w.g, w.now, w.cfg) })
}

// murky reports whether the group may not know all that the processes
// read: a store went back, and its correction round is still open or the
// lease of what the lost writes answered may not have lapsed yet.
func (w *world) murky() bool {
	return !w.wentBack.IsZero() && (w.g.CorrectionOpen || w.now.Before(w.wentBack.Add(2*w.cfg.MemberLease)))
}

// coordinatorRestart kills the coordinator between two calls and starts it
// again on what it wrote: the group is loaded from the store and restored.
// What no call listed in its Changes is lost, the epoch catch-ups first;
// the processes carry on with what they were answered, and must never be
// refused or fenced for an epoch the coordinator answered and forgot.
func (w *world) coordinatorRestart() {
	w.g = w.store.load()
	w.durable = durableButEpochs(w.g)
	// Member epochs restart from the stored ones (the stored ones never go
	// back: simStore.write checks).
	w.epochs = map[string]int64{}
	for id, m := range w.g.Members {
		w.epochs[id] = m.Epoch
	}
	// Requests held up in the network stay there: a proxy or the cluster
	// front may hand them to the next coordinator, which knows no
	// requestSeq of any member.
	w.logf("coordinator restarts from the store")
	w.count("coordinator-restart")
	w.call("restore", func() Result { return Restore(w.g, w.now, w.cfg) })
}

func (w *world) layout() {
	g := w.g
	count, draining := g.ShardCount, slices.Clone(g.DrainingShards)
	switch w.rng.IntN(3) {
	case 0: // grow
		count += 1 + w.rng.IntN(4)
	case 1: // shrink: removed shards keep draining
		k := min(count, 1+w.rng.IntN(4))
		for s := count - k; s < count; s++ {
			draining = append(draining, s)
		}
		count -= k
	case 2: // the drain finished
		draining = nil
	}
	if count > 24 {
		count = 24
	}
	w.logf("layout %d+%v", count, slices.Clone(draining))
	w.count("layout")
	w.call("layout", func() Result { return SetLayout(g, count, draining, w.now, w.cfg) })
}
