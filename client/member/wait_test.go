package member

import (
	"testing"
	"time"
)

// The client module cannot import the server's internal/poll, so its
// tests keep this small copy of it: they wait on a condition, never a
// fixed time.

// pollUntil polls cond every few milliseconds until it holds or timeout
// passes, and reports whether it held.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}

// waitUntil fails the test if cond does not hold within timeout.
func waitUntil(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	if !pollUntil(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// never fails the test the first time cond holds within d: it shows that
// something does not happen over a window whose length is the point.
func never(t testing.TB, d time.Duration, cond func() bool, what string) {
	t.Helper()
	if pollUntil(d, cond) {
		t.Fatalf("%s happened within %v", what, d)
	}
}
