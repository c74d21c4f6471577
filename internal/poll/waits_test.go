package poll_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/poll"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	if !poll.Soon(10*time.Second, func() bool { return n.Add(1) >= 3 }) {
		t.Fatal("Poll gave up on a condition that came true")
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("cond ran %d times, want 3", got)
	}
}

func TestPollReportsAConditionThatNeverHolds(t *testing.T) {
	start := time.Now()
	if poll.Soon(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("Poll gave up after %v, before its timeout", el)
	}
}

func TestReceiveReturnsTheValueSent(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := poll.Receive(t, time.Second, ch, "a value"); got != 7 {
		t.Fatalf("got %d, want 7", got)
	}
}
