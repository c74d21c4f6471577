package cluster_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rscoord/rscoord/cluster"
)

// The lease is measured on CLOCK_BOOTTIME, which counts a suspension of
// the host as etcd does, not on Go's monotonic clock, which does not.
func TestLeaseClockReadsBoottime(t *testing.T) {
	boottime := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
			t.Fatalf("CLOCK_BOOTTIME: %v", err)
		}
		return time.Duration(ts.Nano())
	}
	for range 3 {
		before := boottime()
		got := cluster.LeaseClockNow()
		after := boottime()
		if got < before || got > after {
			t.Fatalf("lease clock read %v, not between the CLOCK_BOOTTIME readings %v and %v around it", got, before, after)
		}
	}
}
