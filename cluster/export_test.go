package cluster

import (
	"context"
	"time"
)

// JoinWithClock is Join with the lease measured on now.
func JoinWithClock(ctx context.Context, opts Options, now func() time.Duration) (*Node, error) {
	return join(ctx, opts, funcClock(now))
}

// LeaseClockNow reads the clock Join measures the lease on.
func LeaseClockNow() time.Duration { return newLeaseClock().now() }

// funcClock reads a function: the clock a test injects.
type funcClock func() time.Duration

func (f funcClock) now() time.Duration { return f() }
