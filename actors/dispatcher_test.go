package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/poll"
)

// A mailbox that blocks must not hold up another: past the workers, each
// gets a goroutine of its own; once closed, the idle workers end.
func TestMailboxDispatcherNeverQueuesAMailboxBehindAnother(t *testing.T) {
	d := newMailboxDispatcher(2)
	release := make(chan struct{})
	var ran atomic.Int32
	var wg sync.WaitGroup
	const blocked = 5
	for range blocked {
		wg.Add(1)
		d.Schedule(func() {
			defer wg.Done()
			ran.Add(1)
			<-release
		})
	}
	poll.Until(t, 5*time.Second, func() bool { return ran.Load() == blocked }, "every blocked mailbox running at once")
	close(release)
	wg.Wait()
	// The workers are idle again: a mailbox goes to one of them.
	done := make(chan struct{})
	d.Schedule(func() { close(done) })
	poll.Receive(t, 5*time.Second, done, "a mailbox scheduled after the others")
	if n := d.workers.Load(); n > 2 {
		t.Fatalf("%d workers, want at most 2", n)
	}
	d.close()
	poll.Until(t, 5*time.Second, func() bool { return d.workers.Load() == 0 }, "the workers ending after close")
	// After close a mailbox still runs, on a goroutine of its own.
	after := make(chan struct{})
	d.Schedule(func() { close(after) })
	poll.Receive(t, 5*time.Second, after, "a mailbox scheduled after close")
}
