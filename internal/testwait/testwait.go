// Package testwait lets tests wait on a condition instead of sleeping a
// fixed time. A fixed sleep is either too short on a loaded machine, which
// makes the test flaky, or too long everywhere else, which makes it slow.
package testwait

import (
	"testing"
	"time"
)

// Tick is how often Until and Never check their condition.
const Tick = 10 * time.Millisecond

// Until polls cond until it holds and fails the test if it still does not
// hold after timeout. The message names what the test waited for.
func Until(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Poll polls cond until it holds or timeout passes. It reports whether cond
// held. Tests use it when a timeout is an outcome they check themselves.
func Poll(timeout time.Duration, cond func() bool) bool {
	return PollEvery(timeout, Tick, cond)
}

// PollEvery is Poll checking cond every interval, for a condition that is
// costly to check, such as a request to a server process.
func PollEvery(timeout, every time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(every)
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

// UntilEvery is Until checking cond every interval.
func UntilEvery(t testing.TB, timeout, every time.Duration, cond func() bool, what string) {
	t.Helper()
	if !PollEvery(timeout, every, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Never checks that cond stays false for the whole of d and fails the test
// the first time it holds. Tests use it to show that something does not
// happen within a window, where the window length is the point.
func Never(t testing.TB, d time.Duration, cond func() bool, what string) {
	t.Helper()
	if Poll(d, cond) {
		t.Fatalf("%s happened within %v", what, d)
	}
}

// Receive waits for a value on ch and fails the test after timeout.
func Receive[T any](t testing.TB, timeout time.Duration, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	var zero T
	return zero
}
