package cluster

import "time"

// leaseClock reads the time this replica's etcd lease is measured on, as
// a duration from a fixed point of the clock's choosing.
//
// etcd counts the lease down on its own hosts, whatever happens to this
// one; so must this clock. Go's monotonic clock (CLOCK_MONOTONIC on Linux)
// stops while the host is suspended: a replica that woke from a suspension
// longer than its lease would read its last renewal as recent, believe its
// lease still ran and answer heartbeats write-free (renewals are not
// written) from a state another replica has loaded and moved on since,
// until its next renewal failed. CLOCK_BOOTTIME counts the suspension.
type leaseClock interface {
	now() time.Duration
}

// monoClock is Go's monotonic clock: where nothing better is known.
type monoClock struct{ base time.Time }

func (c monoClock) now() time.Duration { return time.Since(c.base) }
