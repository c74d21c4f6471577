package producer

import (
	"testing"
	"time"
)

// TestRoutingExpiresByEitherClock: the routing lease ends when either the
// monotonic or the wall clock says it has passed. A suspended machine
// stops the monotonic clock while the wall clock goes on: here, a fetch
// whose wall reading is further back than its monotonic one.
func TestRoutingExpiresByEitherClock(t *testing.T) {
	const lease = 10 * time.Second
	now := time.Now()
	tests := []struct {
		name       string
		mono, wall time.Duration // the fetch, from now, by each clock
		want       bool
	}{
		{"just fetched", 0, 0, false},
		{"within the lease", -lease / 2, -lease / 2, false},
		{"past the lease", -lease - time.Millisecond, -lease - time.Millisecond, true},
		{"suspended past the lease", -time.Second, -time.Minute, true},
		{"wall clock stepped back", -lease - time.Second, time.Minute, true},
		{"wall clock stepped forward, within the lease", -time.Second, -time.Second / 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &routing{keys: []string{"orders:0"}, fetchedAt: now.Add(tc.mono), fetchedWall: now.Round(0).Add(tc.wall)}
			if got := r.expired(now, lease); got != tc.want {
				t.Fatalf("expired = %v (age %v), want %v", got, r.age(now), tc.want)
			}
		})
	}
}
