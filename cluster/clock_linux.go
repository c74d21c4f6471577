package cluster

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootClock is CLOCK_BOOTTIME: monotonic, and it goes on while the host
// is suspended.
type bootClock struct{}

func (bootClock) now() time.Duration {
	var ts unix.Timespec
	// Checked to work in newLeaseClock; it has no other way to fail.
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return time.Duration(ts.Nano())
}

// newLeaseClock is the clock of [Node]'s lease: CLOCK_BOOTTIME, or Go's
// monotonic clock on a kernel without it (before Linux 2.6.39).
func newLeaseClock() leaseClock {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return monoClock{base: time.Now()}
	}
	return bootClock{}
}
