package member

import (
	"fmt"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// answerFacts is what the member knows, after an OK, SYNC_METADATA or
// REVOKE_PENDING answer, to decide when to heartbeat next (nextBeat).
type answerFacts struct {
	// News: the answer changed what the member must act on or report —
	// its status, its assigned shards (shards to start, shards to revoke
	// and confirm) or its pending shards — compared with the previous
	// answer or with what it owns.
	News bool
	// Asked is the waitMs the request carried (0: not held).
	Asked time.Duration
	// Took is how long the answer took, from the send.
	Took time.Duration
	// Behind: the answer's memberEpoch or metadataVersion differs from the
	// request's. The coordinator holds only a request that is current in
	// both (docs/protocol-notes.md, held heartbeats), so a held request
	// that was behind is answered at once, whatever waitMs says.
	Behind bool
	// CaughtUp: the heartbeat just answered was itself sent at once to
	// catch up after such an answer.
	CaughtUp bool
	// Steady: the next request asks for a held answer (memberActor.waitMs).
	Steady bool
	// Interval is the heartbeatIntervalMs of the answer.
	Interval time.Duration
}

// nextBeat decides when the member heartbeats after an answer (docs/protocol.md
// §9.5, held heartbeats), and whether that heartbeat catches up after an
// answer that was behind.
//
// At once when the answer brought news to act on or report; at once when
// the wait the request asked for is over (a held answer that ran its wait:
// the steady cadence, not an extra heartbeat); at once, once in a row, when
// a held request came back early only because it was behind (a new epoch
// or metadata version), so that the member, now current, is parked again
// instead of deaf for an interval — left waiting, under churn that moves the
// epoch every interval it would never be held again; at once after an
// unheld answer when the next request is held (a steady member goes back to
// being parked). Otherwise after the rest of the wait it asked for, at most
// the answered interval, or after the interval. A new epoch or metadata
// version alone never brings the next heartbeat forward by itself: held
// answers carry it when their wait ends, and the next heartbeat sends it.
func nextBeat(f answerFacts) (next time.Duration, catchUp bool) {
	switch {
	case f.News:
		return 0, false
	case f.Asked > 0:
		left := f.Asked - f.Took
		switch {
		case left <= 0:
			return 0, false
		case f.Behind && f.Steady && !f.CaughtUp:
			return 0, true
		}
		return min(left, f.Interval), false
	case f.Steady:
		return 0, false
	}
	return f.Interval, false
}

// answerView is what of an answer the member acts on or reports: status,
// assigned and pending shards. Epochs and metadata versions are left out:
// the next heartbeat carries them, and they alone ask nothing of the
// member (nextBeat).
func answerView(resp protocol.HeartbeatResponse) string {
	return fmt.Sprint(resp.Status, sanitizeShards(resp.Assignment.AssignedShards),
		sanitizeShards(resp.Assignment.PendingShards))
}
