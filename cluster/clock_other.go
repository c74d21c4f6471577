//go:build !linux

package cluster

import "time"

// newLeaseClock is the clock of [Node]'s lease: Go's monotonic clock,
// which may stop while the host sleeps (CLOCK_BOOTTIME is Linux's).
func newLeaseClock() leaseClock { return monoClock{base: time.Now()} }
