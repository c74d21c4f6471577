package actors

import (
	"iter"
	"time"
)

// heldCoalesce is how early a parked answer may go out when the group's
// wait timer fires for another one: the answers whose waits end within it
// are sent together. Each timer firing costs a goroutine, a message and a
// wake-up of the group's mailbox; at a thousand held members a second,
// one per answer was a tenth of a held answer's server CPU. A member
// answered a few milliseconds early heartbeats that much earlier
// (docs/protocol.md §9.5 lets a coordinator answer at once).
const heldCoalesce = 5 * time.Millisecond

// heldWaits are the ends of the parked answers' waits, earliest first, and
// the one timer that fires at the earliest. A group held one timer per
// parked answer before: a goroutine and a message to its mailbox per held
// heartbeat.
type heldWaits struct {
	queue []waitEnd // a binary heap on at
	timer *time.Timer
	// at is when timer fires; zero while it is stopped or has fired.
	at time.Time
}

// waitEnd is one parked answer's end of wait. An answer sent or replaced
// meanwhile leaves its entry behind: seq tells it from the member's later
// parked answer.
type waitEnd struct {
	at     time.Time
	member string
	seq    uint64
}

// add queues p's end of wait.
func (w *heldWaits) add(p *parkedAnswer) {
	w.queue = append(w.queue, waitEnd{at: p.due, member: p.req.MemberID, seq: p.seq})
	for i := len(w.queue) - 1; i > 0; {
		parent := (i - 1) / 2
		if !w.queue[i].at.Before(w.queue[parent].at) {
			break
		}
		w.queue[i], w.queue[parent] = w.queue[parent], w.queue[i]
		i = parent
	}
}

// pop removes the earliest entry.
func (w *heldWaits) pop() waitEnd {
	top := w.queue[0]
	last := len(w.queue) - 1
	w.queue[0] = w.queue[last]
	w.queue[last] = waitEnd{}
	w.queue = w.queue[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < last && w.queue[l].at.Before(w.queue[small].at) {
			small = l
		}
		if r < last && w.queue[r].at.Before(w.queue[small].at) {
			small = r
		}
		if small == i {
			break
		}
		w.queue[i], w.queue[small] = w.queue[small], w.queue[i]
		i = small
	}
	return top
}

// current is the parked answer e stands for, nil when it was answered
// meanwhile.
func (e waitEnd) current(parked map[string]*parkedAnswer) *parkedAnswer {
	if p := parked[e.member]; p != nil && p.seq == e.seq {
		return p
	}
	return nil
}

// due yields, earliest first, the parked answers whose wait ends by limit,
// each taken from the queue before it is yielded.
func (w *heldWaits) due(limit time.Time, parked map[string]*parkedAnswer) iter.Seq[*parkedAnswer] {
	return func(yield func(*parkedAnswer) bool) {
		for len(w.queue) > 0 && !w.queue[0].at.After(limit) {
			if p := w.pop().current(parked); p != nil && !yield(p) {
				return
			}
		}
	}
}

// fired notes that the timer fired.
func (w *heldWaits) fired() { w.at = time.Time{} }

// armWaits sets the group's wait timer to the earliest end of wait of a
// parked answer, or stops it when none is parked. A timer that fires
// early (its earliest answer went out meanwhile) finds nothing due and is
// set again.
func (a *groupActor) armWaits() {
	w := &a.waits
	for len(w.queue) > 0 && w.queue[0].current(a.parked) == nil {
		w.pop()
	}
	if len(w.queue) == 0 || len(a.parked) == 0 {
		w.queue = nil
		if w.timer != nil {
			w.timer.Stop()
		}
		w.at = time.Time{}
		return
	}
	next := w.queue[0].at
	if !w.at.IsZero() && !w.at.After(next) {
		return
	}
	w.at = next
	d := time.Until(next)
	if w.timer == nil {
		self, root, msg := a.self, a.env.system.Root, &heldExpiredMsg{}
		w.timer = time.AfterFunc(d, func() { root.Send(self, msg) })
		return
	}
	w.timer.Reset(d)
}
