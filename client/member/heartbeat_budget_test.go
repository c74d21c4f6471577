package member

import (
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// A RETRY that says another replica may serve is asked again soon, backing
// off, so that the lease is renewed within a take-over; any other RETRY
// waits the interval.
func TestRetryWait(t *testing.T) {
	const interval = 3 * time.Second
	tests := []struct {
		code    protocol.ErrorCode
		retries int
		want    time.Duration
	}{
		{"", 1, interval},
		{protocol.CodeMemberIDInUse, 1, interval},
		{protocol.CodeMemberLimitReached, 3, interval},
		{protocol.CodeReplicaNotOwner, 1, 100 * time.Millisecond},
		{protocol.CodeReplicaLeaseUncertain, 2, 200 * time.Millisecond},
		{protocol.CodeReplicaJoining, 3, 400 * time.Millisecond},
		{protocol.CodeCoordinatorTerminating, 4, 800 * time.Millisecond},
		{protocol.CodeStoreUnavailable, 5, time.Second},
		{protocol.CodeStoreUnavailable, 60, time.Second},
	}
	for _, tc := range tests {
		if got := retryWait(tc.code, tc.retries, interval); got != tc.want {
			t.Errorf("retryWait(%q, %d) = %v, want %v", tc.code, tc.retries, got, tc.want)
		}
	}
	if got := retryWait(protocol.CodeReplicaNotOwner, 5, 300*time.Millisecond); got != 300*time.Millisecond {
		t.Errorf("retryWait past a short interval = %v, want the interval", got)
	}
}

// A steady member's hold leaves the lease room for the hedged copy: its
// wait plus two hedge bounds fit in what is left of the lease.
func TestHoldLeavesRoomForTwoReplicas(t *testing.T) {
	tests := []struct {
		interval, left, bound, want time.Duration
	}{
		{time.Second, 5 * time.Second, time.Second, time.Second},          // lease 6 s: the interval
		{3 * time.Second, 12 * time.Second, time.Second, 3 * time.Second}, // the defaults
		{3 * time.Second, 4 * time.Second, time.Second, 2 * time.Second},  // lease 6 s, interval 3 s
		{time.Second, 1500 * time.Millisecond, time.Second, 0},            // no room: not held
	}
	for _, tc := range tests {
		got := holdFor(tc.interval, tc.left, tc.bound)
		if got != tc.want {
			t.Errorf("holdFor(%v, %v, %v) = %v, want %v", tc.interval, tc.left, tc.bound, got, tc.want)
		}
		if got > 0 && got+2*tc.bound > tc.left {
			t.Errorf("holdFor(%v, %v, %v) = %v leaves no room for a second replica", tc.interval, tc.left, tc.bound, got)
		}
	}
}
