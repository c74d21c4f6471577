package poll_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/internal/poll"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		holdAt int32 // the check at which cond starts to hold; 0: never
		want   bool
	}{
		{"holds at once", 1, true},
		{"holds at the third check", 3, true},
		{"never holds", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var checks atomic.Int32
			got := poll.Wait(time.Second, time.Millisecond, func() bool {
				n := checks.Add(1)
				return tc.holdAt > 0 && n >= tc.holdAt
			})
			if got != tc.want {
				t.Fatalf("Wait = %v after %d checks, want %v", got, checks.Load(), tc.want)
			}
			if tc.want && checks.Load() != tc.holdAt {
				t.Errorf("%d checks, want Wait to stop at the first that holds (%d)", checks.Load(), tc.holdAt)
			}
		})
	}
}

// A condition that holds by the deadline counts: the last check is made
// when the time is up.
func TestWaitContextChecksOnceMoreAtTheEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var checks atomic.Int32
	got := poll.WaitContext(ctx, time.Hour, func() bool {
		if checks.Add(1) == 1 {
			cancel()
			return false
		}
		return true
	})
	if !got || checks.Load() != 2 {
		t.Fatalf("WaitContext = %v after %d checks, want true after 2", got, checks.Load())
	}
}

func TestHoldEndsWithItsContext(t *testing.T) {
	if !poll.Hold(context.Background(), time.Millisecond) {
		t.Error("Hold of 1ms did not report the whole span")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if poll.Hold(ctx, time.Hour) {
		t.Error("Hold with a cancelled context reported the whole hour")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Hold with a cancelled context took %v", took)
	}
}

func TestStays(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failAt int32 // the check at which cond fails; 0: never
		want   bool
	}{
		{"holds all along", 0, true},
		{"fails at once", 1, false},
		{"fails at the third check", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var checks atomic.Int32
			got := poll.Stays(50*time.Millisecond, time.Millisecond, func() bool {
				return tc.failAt == 0 || checks.Add(1) < tc.failAt
			})
			if got != tc.want {
				t.Fatalf("Stays = %v, want %v", got, tc.want)
			}
			if !tc.want && checks.Load() != tc.failAt {
				t.Errorf("%d checks, want Stays to stop at the first that fails (%d)", checks.Load(), tc.failAt)
			}
		})
	}
}
