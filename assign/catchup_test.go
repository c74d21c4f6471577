package assign

import (
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// catchUpWorld is a STABLE group of two shards with a and b, each owning
// one, written to a store; then c joins (written), which moves the
// assignment epoch and nothing of a and b.
type catchUpWorld struct {
	g       *Group
	store   *simStore
	a, b, c *client
	now     time.Time
	cfg     Config
}

func newCatchUpWorld(t *testing.T) *catchUpWorld {
	t.Helper()
	g, cs, now := stable(t, 2, "a", "b")
	w := &catchUpWorld{g: g, store: newSimStore(g), a: cs[0], b: cs[1], now: now, cfg: testConfig()}
	w.c = newClient(t, g, "c")
	if res := w.beat(t, w.c); !res.Persist || len(assigned(res.Response)) != 0 {
		t.Fatalf("c's join: %+v", res)
	}
	return w
}

// beat sends c's heartbeat and writes what it says changed.
func (w *catchUpWorld) beat(t *testing.T, c *client) Result {
	t.Helper()
	w.now = w.now.Add(10 * time.Millisecond)
	c.g = w.g
	res := c.beat(w.now)
	if res.Persist {
		w.write(t, res.Changes)
	}
	return res
}

// crash builds the group again from the store and restores it.
func (w *catchUpWorld) crash(t *testing.T) {
	t.Helper()
	w.g = w.store.load()
	if res := Restore(w.g, w.now, w.cfg); res.Persist {
		w.write(t, res.Changes)
	}
	for _, c := range []*client{w.a, w.b, w.c} {
		c.g = w.g
	}
}

// write writes what c names to the store; a member's stored epoch never
// goes back (a restart would restore the older one).
func (w *catchUpWorld) write(t *testing.T, c Changes) {
	t.Helper()
	if back := w.store.write(w.g, c); len(back) > 0 {
		t.Errorf("stored epoch of %v went back", back)
	}
}

// send runs req without a client applying the answer.
func (w *catchUpWorld) send(t *testing.T, req *protocol.HeartbeatRequest) Result {
	t.Helper()
	w.now = w.now.Add(10 * time.Millisecond)
	res := Heartbeat(w.g, req, w.now, w.cfg)
	if res.Persist {
		w.write(t, res.Changes)
	}
	return res
}

// TestCatchUpIsNotPersisted: an answer that moves a member's epoch to the
// assignment epoch and changes nothing else of it is not Persist; one that
// changes something else too is, and the record written carries the new
// epoch.
func TestCatchUpIsNotPersisted(t *testing.T) {
	t.Parallel()
	w := newCatchUpWorld(t)
	stored := w.store.members["a"].Epoch
	res := w.beat(t, w.a)
	r := res.Response
	if r.Status != protocol.StatusOK || r.MemberEpoch != w.g.AssignmentEpoch || r.MemberEpoch <= stored {
		t.Fatalf("catch-up answered %s epoch %d; assignment epoch %d, stored %d", r.Status, r.MemberEpoch, w.g.AssignmentEpoch, stored)
	}
	if res.Persist || !res.Changes.Empty() {
		t.Errorf("an epoch catch-up alone is Persist %v, Changes %+v", res.Persist, res.Changes)
	}
	if got := w.g.Members["a"]; got.Epoch != r.MemberEpoch || got.PreviousEpoch != stored {
		t.Errorf("in memory a is e%d/%d, want e%d/%d", got.Epoch, got.PreviousEpoch, r.MemberEpoch, stored)
	}
	if got := w.store.members["a"].Epoch; got != stored {
		t.Errorf("stored epoch of a moved to %d", got)
	}

	// b catches up and reports another name in the same heartbeat: its
	// record is written, with the new epoch.
	req := w.b.sim.request()
	req.MemberName = "renamed"
	res = w.send(t, req)
	if !res.Persist || len(res.Changes.Members) != 1 || res.Changes.Members[0] != "b" {
		t.Fatalf("catch-up with a rename: Persist %v, Changes %+v", res.Persist, res.Changes)
	}
	if got := w.store.members["b"]; got.Epoch != w.g.AssignmentEpoch || got.Name != "renamed" {
		t.Errorf("stored b is e%d %q, want e%d renamed", got.Epoch, got.Name, w.g.AssignmentEpoch)
	}
}

// TestForgottenEpochAfterReload: after the coordinator reloads a group, a
// member carrying an epoch it was answered but that was never written is
// processed as current; an epoch above the assignment epoch comes from a
// history the store lost (it went back) and is decided as a metadata
// correction, answered with the stored epoch; a lower one is judged as
// before.
func TestForgottenEpochAfterReload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		who       string
		epoch     func(w *catchUpWorld, stored Member) int64
		status    protocol.Status
		forgotten bool
		persist   bool
	}{
		{"the forgotten epoch is current", "a",
			func(w *catchUpWorld, _ Member) int64 { return w.g.AssignmentEpoch }, protocol.StatusOK, true, false},
		{"the stored epoch is current", "a",
			func(_ *catchUpWorld, s Member) int64 { return s.Epoch }, protocol.StatusOK, false, false},
		{"above the assignment epoch", "a",
			func(w *catchUpWorld, _ Member) int64 { return w.g.AssignmentEpoch + 1 }, protocol.StatusSyncMetadata, false, false},
		{"below the stored epoch, not the previous one", "b",
			func(_ *catchUpWorld, s Member) int64 { return s.Epoch - 1 }, protocol.StatusFencedMemberEpoch, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newCatchUpWorld(t)
			w.beat(t, w.a)
			w.beat(t, w.b)
			w.crash(t)
			stored := w.store.members[tc.who]
			if tc.who == "b" && stored.PreviousEpoch == stored.Epoch-1 {
				t.Fatalf("scenario: b's previous epoch is %d", stored.PreviousEpoch)
			}
			c := map[string]*client{"a": w.a, "b": w.b}[tc.who]
			req := c.sim.request()
			req.MemberEpoch = tc.epoch(w, stored)
			res := w.send(t, req)
			r := res.Response
			if r.Status != tc.status || res.Events.ForgottenEpochAccepted != tc.forgotten || res.Persist != tc.persist {
				t.Fatalf("epoch %d (stored %d, assignment %d): %s forgotten %v persist %v; want %s %v %v", req.MemberEpoch,
					stored.Epoch, w.g.AssignmentEpoch, r.Status, res.Events.ForgottenEpochAccepted, res.Persist, tc.status, tc.forgotten, tc.persist)
			}
			m := w.g.Members[tc.who]
			if tc.status == protocol.StatusOK {
				if r.MemberEpoch != w.g.AssignmentEpoch || !m.State.Live() || len(assigned(r)) != 1 {
					t.Errorf("answer %+v, member %s", r, m.State)
				}
				if tc.forgotten && m.PreviousEpoch != stored.Epoch {
					t.Errorf("previous epoch %d, want the stored %d", m.PreviousEpoch, stored.Epoch)
				}
			}
			if tc.status == protocol.StatusSyncMetadata {
				if r.MemberEpoch != stored.Epoch || !res.Events.LostEpoch || !m.State.Live() {
					t.Errorf("correction: answer e%d (want the stored e%d), lost epoch %v, member %s",
						r.MemberEpoch, stored.Epoch, res.Events.LostEpoch, m.State)
				}
			}
		})
	}
}

// TestForgottenEpochMarkClears: the leniency lasts until the member's first
// heartbeat of its own incarnation is processed, whatever its outcome; a
// heartbeat of another incarnation does not end it.
func TestForgottenEpochMarkClears(t *testing.T) {
	t.Parallel()
	w := newCatchUpWorld(t)
	w.beat(t, w.a)
	w.crash(t)
	forgotten := w.g.AssignmentEpoch

	other := w.a.sim.request()
	other.InstanceID = "another-process"
	other.MemberEpoch = forgotten
	if r := w.send(t, other).Response; r.Status != protocol.StatusFencedMemberEpoch {
		t.Fatalf("another incarnation: %s", r.Status)
	}
	ahead := w.a.sim.request()
	ahead.MemberEpoch = w.g.AssignmentEpoch + 1
	if r := w.send(t, ahead).Response; r.Status != protocol.StatusSyncMetadata {
		t.Fatalf("an epoch above the assignment epoch (a lost history's): %s", r.Status)
	}
	// No longer taken as current: in a loaded group an epoch the member
	// was not answered here may be a lost history's, corrected to the
	// stored one.
	req := w.a.sim.request()
	req.MemberEpoch = forgotten
	if r := w.send(t, req).Response; r.Status != protocol.StatusSyncMetadata || r.MemberEpoch != w.g.Members["a"].Epoch {
		t.Errorf("after a processed heartbeat the stored epoch %d is the member's again; %d answered %s e%d",
			w.g.Members["a"].Epoch, forgotten, r.Status, r.MemberEpoch)
	}

	// Without the foreign heartbeat and the one ahead: the member's own
	// heartbeat with the forgotten epoch is current.
	w = newCatchUpWorld(t)
	w.beat(t, w.a)
	w.crash(t)
	if res := w.beat(t, w.a); res.Response.Status != protocol.StatusOK || !res.Events.ForgottenEpochAccepted {
		t.Fatalf("forgotten epoch: %+v", res)
	}
}

// TestRestoreUnconfirmsEpochs: a member of a group this coordinator runs
// since its join is strict (an epoch above its own is INVALID_REQUEST, as
// in docs/protocol.md §6.1 step 5); [Restore] makes every member lenient,
// also on a group the caller kept in memory.
func TestRestoreUnconfirmsEpochs(t *testing.T) {
	t.Parallel()
	w := newCatchUpWorld(t)
	m := w.g.Members["a"]
	if m.Epoch >= w.g.AssignmentEpoch {
		t.Fatalf("scenario: a at e%d, assignment epoch %d", m.Epoch, w.g.AssignmentEpoch)
	}
	req := w.a.sim.request()
	req.MemberEpoch = w.g.AssignmentEpoch
	if r := w.send(t, req).Response; r.Status != protocol.StatusInvalidRequest {
		t.Fatalf("a confirmed member ahead of its epoch: %s", r.Status)
	}
	w = newCatchUpWorld(t)
	Restore(w.g, w.now, w.cfg)
	req = w.a.sim.request()
	req.MemberEpoch = w.g.AssignmentEpoch
	if res := w.send(t, req); res.Response.Status != protocol.StatusOK || !res.Events.ForgottenEpochAccepted {
		t.Fatalf("after Restore: %s", res.Response.Status)
	}
}

// TestCreatedGroupRefusesFutureEpochs: a group this process created has no
// lost history, so an epoch above any it answered stays the client's bug
// (INVALID_REQUEST), also after the Restore its actor runs on start; a
// group decoded from the store corrects the member instead.
func TestCreatedGroupRefusesFutureEpochs(t *testing.T) {
	t.Parallel()
	w := newCatchUpWorld(t)
	w.beat(t, w.a)
	Restore(w.g, w.now, w.cfg)
	ahead := w.a.sim.request()
	ahead.MemberEpoch = w.g.AssignmentEpoch + 1
	if r := w.send(t, ahead).Response; r.Status != protocol.StatusInvalidRequest {
		t.Fatalf("created group, an epoch above the assignment epoch: %s", r.Status)
	}
	w.crash(t) // decoded from the store and restored
	ahead = w.a.sim.request()
	ahead.MemberEpoch = w.g.AssignmentEpoch + 1
	if res := w.send(t, ahead); res.Response.Status != protocol.StatusSyncMetadata || !res.Events.LostEpoch {
		t.Fatalf("loaded group, an epoch above the assignment epoch: %s", res.Response.Status)
	}
}
