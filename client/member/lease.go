package member

import (
	"sync/atomic"
	"time"
)

// leaseClock is one member's assignment lease (docs/protocol.md §8): reads and
// ACKs are allowed only before its deadline. The member actor renews it;
// read loops and Ack check it directly, so that failing closed does not
// wait for the actor to notice.
//
// Times are durations on the monotonic clock since base, so that a
// wall-clock step back cannot extend a lease. The lease must also end by
// the wall clock: the monotonic clock stops while the machine is
// suspended, and the coordinator's lease does not, so a member that wakes
// from a suspension longer than its lease must not read on. A wall-clock
// step forward therefore cuts the lease until the next renewal, which is
// the safe side.
type leaseClock struct {
	base time.Time
	// ttl is the lease length in nanoseconds: the member's own setting,
	// lowered to the coordinator's memberLeaseMs when that is shorter.
	ttl atomic.Int64
	// end is the end of the lease; nil means no lease (not joined yet,
	// fenced).
	end atomic.Pointer[leaseEnd]
	// seenPassed is the last end a check (until) found passed: a read
	// loop or an Ack may see a lease lapse that the member actor only
	// looks at after a renewal (lapsed).
	seenPassed atomic.Pointer[leaseEnd]
}

// leaseEnd is where a lease ends, by both clocks.
type leaseEnd struct {
	// mono is the end in nanoseconds since base on the monotonic clock.
	mono time.Duration
	// wall is the end on the wall clock, set when the lease was renewed.
	wall time.Time
}

func newLeaseClock(ttl time.Duration) *leaseClock {
	l := &leaseClock{base: time.Now()}
	l.ttl.Store(int64(ttl))
	return l
}

// length is the lease length in force.
func (l *leaseClock) length() time.Duration { return time.Duration(l.ttl.Load()) }

// setLength sets the lease length (renewals from now on use it).
func (l *leaseClock) setLength(d time.Duration) { l.ttl.Store(int64(d)) }

// now is the current time on the lease's clock.
func (l *leaseClock) now() time.Duration { return time.Since(l.base) }

// stamp is the current time by both clocks, from one reading: now, and the
// wall clock's.
func (l *leaseClock) stamp() (time.Duration, time.Time) {
	t := time.Now()
	return t.Sub(l.base), t.Round(0)
}

// renew extends the lease to sentAt + ttl, where sentAt (sentWall on the
// wall clock, from stamp) is when the heartbeat that succeeded was sent,
// never when its answer arrived: the coordinator starts its own lease no
// earlier than it receives the heartbeat, so measuring from the send makes
// the member's lease end first, and a member never reads a shard the
// coordinator has already given to another. It reports the deadline on
// the monotonic clock.
//
// An answer that arrives after a later heartbeat's (one sent earlier) does
// not shorten the lease. A deadline further than now + ttl, though, was
// set under a longer lease than the one in force: the coordinator's
// memberLeaseMs went down (another replica, a new setting), and the shorter
// lease takes effect at once.
func (l *leaseClock) renew(sentAt time.Duration, sentWall time.Time) time.Duration {
	ttl := l.length()
	want := &leaseEnd{mono: sentAt + ttl, wall: sentWall.Add(ttl)}
	for {
		cur := l.end.Load()
		next := want
		if cur != nil && cur.mono > want.mono && cur.mono <= l.now()+ttl {
			next = cur
		}
		if next == cur || l.end.CompareAndSwap(cur, next) {
			return next.mono
		}
	}
}

// drop ends the lease at once (fencing, rejoin).
func (l *leaseClock) drop() { l.end.Store(nil) }

// valid reports whether reads and ACKs are allowed now.
func (l *leaseClock) valid() bool { return l.until() > 0 }

// until is how long the lease has left (≤ 0 when it has none): the
// shorter of what the monotonic and the wall clock say.
func (l *leaseClock) until() time.Duration {
	e := l.end.Load()
	if e == nil {
		return 0
	}
	// One reading of both clocks (a read loop and every Ack ask).
	now, wall := l.stamp()
	left := min(e.mono-now, e.wall.Sub(wall))
	if left <= 0 && l.seenPassed.Load() != e {
		l.seenPassed.Store(e)
	}
	return left
}

// lapsed reports whether the lease in force has passed: now, or at any
// check since it was set (the wall clock may have stepped back since).
// The member actor asks before a renewal: a lease renewed by an answer
// applied after it had ended still lapsed, and reads and ACKs may have
// been refused meanwhile (doc.go rule 9).
func (l *leaseClock) lapsed() bool {
	e := l.end.Load()
	return e != nil && (l.until() <= 0 || l.seenPassed.Load() == e)
}
