package assign

import (
	"slices"

	"github.com/rscoord/rscoord/client/protocol"
)

// Withdrawn shards (docs/protocol.md §9.1, the hand-off invariant): a report
// that leaves out a shard its member holds releases it only when the member
// sent it after hearing it had to give the shard up. A report can be older
// than what its member reads by now: a copy held up in the network and
// delivered after its retry, or one that crossed the answer granting the
// shard. Taken at its word, it would free a shard the member still reads.
// No client tells us which of its reports came last (requestSeq is an
// option of ours), but every report carries the metadata version of the
// last answer its member had, and the answer that first takes a held shard
// away carries a version the member did not have before: a report with that
// version or a later one was sent after it.
//
// So every answer records, for each held shard it does not give, the version
// of the first answer without it (Member.Withdrawn), and a report that
// leaves such a shard out releases it only with that version or a later one;
// otherwise the shard stays in Revoking, blocking others, until a report
// proves it released or the member's lease lapses. A shard the last answer
// granted, that the member has not reported and that this answer takes away,
// may be read by now: it stays held the same way. An honest member pays one
// round trip at most (its next report carries the new version), and only
// when an answer was lost or crossed a report.

// unproven returns the shards m holds in Current or Revoking that a report
// carrying req's metadata version leaves out (neither owned nor still being
// given up) but cannot release. Shards in Granted stay held through it; the
// answer decides what happens to them (see withdraw).
func unproven(m *Member, req *protocol.HeartbeatRequest, owned, revoking []int) []int {
	if len(m.Withdrawn) == 0 {
		return nil // the steady heartbeat: nothing was taken away
	}
	var out []int
	for _, w := range m.Withdrawn {
		s := w.Shard
		if req.MetadataVersion < w.Version && !contains(owned, s) && !contains(revoking, s) && !contains(m.Granted, s) {
			out = append(out, s)
		}
	}
	return out // in shard order, as m.Withdrawn
}

// withdraw records, before an answer giving m the shards assigned, what it
// takes away. A shard the last answer granted that m has not reported
// holding stays held as revoking: the report this answers may predate the
// grant. Every held shard outside assigned keeps the version of the first
// answer without it, this one's if none did before.
func (o *op) withdraw(m *Member, assigned []int) {
	if len(m.Revoking) == 0 && len(m.Withdrawn) == 0 && subset(m.Granted, assigned) && subset(m.Current, assigned) {
		return // the steady answer: nothing taken away
	}
	var kept []int
	for _, s := range m.Granted {
		if !contains(assigned, s) && !contains(m.Current, s) && !contains(m.Revoking, s) {
			kept = append(kept, s)
		}
	}
	if len(kept) > 0 {
		o.setRevoking(m, union(m.Revoking, kept))
	}
	var ws []Withdrawal
	for _, s := range union(m.Current, m.Revoking) {
		if contains(assigned, s) {
			continue
		}
		w := Withdrawal{Shard: s, Version: o.g.MetadataVersion}
		if i, ok := withdrawnAt(m, s); ok {
			w.Version = m.Withdrawn[i].Version
		}
		ws = append(ws, w)
	}
	o.setWithdrawn(m, ws)
}

// withdrawnAt returns the index of shard s in m.Withdrawn.
func withdrawnAt(m *Member, s int) (int, bool) {
	return slices.BinarySearchFunc(m.Withdrawn, s, func(w Withdrawal, s int) int { return w.Shard - s })
}

// keepWithdrawn drops the entries of shards m no longer holds as Current or
// Revoking (they were released, or m left) and of shards granted to it
// again. A report that released them may be answered without a view (a
// fence at its deadline), so it runs whenever a report is recorded, not
// only when an answer is built.
func (o *op) keepWithdrawn(m *Member) {
	if len(m.Withdrawn) == 0 {
		return
	}
	ws := slices.DeleteFunc(slices.Clone(m.Withdrawn), func(w Withdrawal) bool {
		held := contains(m.Current, w.Shard) || contains(m.Revoking, w.Shard)
		return !held || contains(m.Granted, w.Shard)
	})
	o.setWithdrawn(m, ws)
}

func (o *op) setWithdrawn(m *Member, ws []Withdrawal) {
	if !slices.Equal(m.Withdrawn, ws) {
		if len(ws) == 0 {
			ws = nil
		}
		m.Withdrawn = ws
		o.dirty(m)
	}
}
