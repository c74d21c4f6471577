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
// Times are durations on the monotonic clock since base, so a wall-clock
// step can neither extend nor cut a lease.
type leaseClock struct {
	base time.Time
	// ttl is the lease length in nanoseconds: the member's own setting,
	// lowered to the coordinator's memberLeaseMs when that is shorter.
	ttl atomic.Int64
	// deadline is the end of the lease in nanoseconds since base; 0 means
	// no lease (not joined yet, fenced).
	deadline atomic.Int64
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

// renew extends the lease to sentAt + ttl, where sentAt is when the
// heartbeat that succeeded was sent, never when its answer arrived: the
// coordinator starts its own lease no earlier than it receives the
// heartbeat, so measuring from the send makes the member's lease end first,
// and a member never reads a shard the coordinator has already given to
// another. It never shortens the lease, and reports the deadline.
func (l *leaseClock) renew(sentAt time.Duration) time.Duration {
	want := int64(sentAt + l.length())
	for {
		cur := l.deadline.Load()
		if cur >= want {
			return time.Duration(cur)
		}
		if l.deadline.CompareAndSwap(cur, want) {
			return time.Duration(want)
		}
	}
}

// end drops the lease at once (fencing, rejoin).
func (l *leaseClock) end() { l.deadline.Store(0) }

// valid reports whether reads and ACKs are allowed now.
func (l *leaseClock) valid() bool {
	d := l.deadline.Load()
	return d > 0 && int64(l.now()) < d
}

// until is how long the lease has left (≤ 0 when it has none).
func (l *leaseClock) until() time.Duration {
	d := l.deadline.Load()
	if d == 0 {
		return 0
	}
	return time.Duration(d) - l.now()
}
