package member

import (
	"testing"
	"time"
)

// TestLeaseClock: a renewal measures the lease from the send by both
// clocks; a late answer to an earlier heartbeat does not shorten it; a
// shorter lease from the coordinator takes effect at the next renewal; and
// a lease whose end has passed on the wall clock is over even while the
// monotonic clock says otherwise (it stops while the machine is suspended;
// the coordinator's lease does not).
func TestLeaseClock(t *testing.T) {
	const ttl = 10 * time.Second
	near := func(t *testing.T, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -100*time.Millisecond || d > 100*time.Millisecond {
			t.Fatalf("%v left, want about %v", got, want)
		}
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, l *leaseClock)
	}{
		{"no lease before the first renewal", func(t *testing.T, l *leaseClock) {
			if l.valid() || l.until() > 0 {
				t.Fatalf("valid %v, %v left", l.valid(), l.until())
			}
		}},
		{"measured from the send", func(t *testing.T, l *leaseClock) {
			mono, wall := l.stamp()
			l.renew(mono-2*time.Second, wall.Add(-2*time.Second))
			near(t, l.until(), ttl-2*time.Second)
		}},
		{"a late answer to an earlier send does not shorten it", func(t *testing.T, l *leaseClock) {
			mono, wall := l.stamp()
			l.renew(mono, wall)
			l.renew(mono-3*time.Second, wall.Add(-3*time.Second))
			near(t, l.until(), ttl)
		}},
		{"a shorter lease takes effect at the next renewal", func(t *testing.T, l *leaseClock) {
			l.renew(l.stamp())
			l.setLength(3 * time.Second)
			l.renew(l.stamp())
			near(t, l.until(), 3*time.Second)
		}},
		{"over by the wall clock: the machine slept", func(t *testing.T, l *leaseClock) {
			// Sent before a suspension longer than the lease: the
			// monotonic clock counted none of it.
			mono, wall := l.stamp()
			l.renew(mono, wall.Add(-time.Minute))
			if l.valid() || l.until() > 0 {
				t.Fatalf("valid %v with %v left, after the lease passed on the wall clock", l.valid(), l.until())
			}
		}},
		{"dropped", func(t *testing.T, l *leaseClock) {
			l.renew(l.stamp())
			l.drop()
			if l.valid() {
				t.Fatal("valid after drop")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newLeaseClock(ttl)) })
	}
}

// TestLeaseLapsed: lapsed tells the member actor, before it renews the
// lease, whether the lease in force ended: it has passed now, or a check
// found it passed earlier (a wall clock that stepped forward and back);
// a lease renewed in time, a renewed lapsed lease, and no lease are not
// lapsed.
func TestLeaseLapsed(t *testing.T) {
	const ttl = 10 * time.Second
	for _, tc := range []struct {
		name string
		set  func(l *leaseClock)
		want bool
	}{
		{"no lease", func(*leaseClock) {}, false},
		{"running", func(l *leaseClock) { l.renew(l.stamp()) }, false},
		{"passed", func(l *leaseClock) {
			mono, wall := l.stamp()
			l.renew(mono-ttl-time.Millisecond, wall.Add(-ttl-time.Millisecond))
		}, true},
		{"passed, then renewed", func(l *leaseClock) {
			mono, wall := l.stamp()
			l.renew(mono-ttl-time.Millisecond, wall.Add(-ttl-time.Millisecond))
			l.until()
			l.renew(l.stamp())
		}, false},
		{"seen passed by the wall clock, which then stepped back", func(l *leaseClock) {
			mono, wall := l.stamp()
			l.renew(mono, wall.Add(-ttl-time.Millisecond))
			if l.until() > 0 {
				panic("the wall clock's end has not passed")
			}
			l.end.Load().wall = wall.Add(ttl)
		}, true},
		{"dropped", func(l *leaseClock) {
			mono, wall := l.stamp()
			l.renew(mono-ttl-time.Millisecond, wall.Add(-ttl-time.Millisecond))
			l.until()
			l.drop()
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLeaseClock(ttl)
			tc.set(l)
			if got := l.lapsed(); got != tc.want {
				t.Fatalf("lapsed() = %v, want %v (%v left)", got, tc.want, l.until())
			}
		})
	}
}
