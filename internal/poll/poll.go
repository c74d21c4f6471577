// Package poll waits in tests for a condition that nothing signals: a file
// that grows, a state read over HTTP, a process's view of a group. It
// checks the condition at once and then at a fixed interval, up to a
// deadline, so that a test moves on as soon as the condition holds and
// still ends when it never does (instead of sleeping a fixed time and
// hoping).
package poll

import (
	"context"
	"testing"
	"time"
)

// Interval is how often [Until] checks its condition.
const Interval = 20 * time.Millisecond

// Wait checks cond at once and then every every, until it holds (true) or
// within has passed (false). The last check is made at the deadline, so a
// condition that holds by then is not missed.
func Wait(within, every time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return WaitContext(ctx, every, cond)
}

// WaitContext is [Wait] bounded by ctx instead of a duration: it returns
// false once ctx is done and cond still does not hold.
func WaitContext(ctx context.Context, every time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-ctx.Done():
			return cond()
		}
	}
}

// Until waits for cond like [Wait] every [Interval] and fails t, naming
// what it waited for, if timeout passes first.
func Until(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	UntilEvery(t, timeout, Interval, cond, what)
}

// UntilEvery is [Until] checking cond every every, for a condition that
// is costly to check, such as a request to a server process.
func UntilEvery(t testing.TB, timeout, every time.Duration, cond func() bool, what string) {
	t.Helper()
	if !Wait(timeout, every, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Soon is [Wait] every [Interval]: it reports whether cond held within
// timeout, for a test that checks a timeout as an outcome itself.
func Soon(timeout time.Duration, cond func() bool) bool {
	return Wait(timeout, Interval, cond)
}

// Never checks that cond stays false for the whole of d and fails t the
// first time it holds: something must not happen within a window whose
// length is the point.
func Never(t testing.TB, d time.Duration, cond func() bool, what string) {
	t.Helper()
	if Soon(d, cond) {
		t.Fatalf("%s happened within %v", what, d)
	}
}

// Receive waits for a value on ch and fails t after timeout.
func Receive[T any](t testing.TB, timeout time.Duration, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	var zero T
	return zero
}

// For waits until cond returns nil, checking every every, and fails t with
// cond's last error if within passes first. Use it when the reason a
// condition does not hold yet is what a failure should show.
func For(t testing.TB, within, every time.Duration, cond func() error) {
	t.Helper()
	var last error
	if !Wait(within, every, func() bool { last = cond(); return last == nil }) {
		t.Fatalf("timed out after %v: %v", within, last)
	}
}

// Stays checks cond at once and then every every for d, and reports false
// at the first check that fails: a state a test expects to last (a
// migration held, a member kept out) is checked all along its span, not
// once at its end.
func Stays(d, every time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return !WaitContext(ctx, every, func() bool { return !cond() })
}

// Hold keeps the caller for d, or less if ctx ends first; it reports
// whether the whole d passed. Use it for a span a test means to last (a
// fault kept on, a load kept running), never to wait for something to
// happen.
func Hold(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
