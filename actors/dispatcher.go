package actors

import (
	"sync"
	"sync/atomic"
)

// mailboxDispatcher runs the group actors' mailboxes. protoactor's default
// starts a goroutine each time an idle mailbox gets a message: under steady
// heartbeats that is one new goroutine per heartbeat or few, and each grows
// its stack to the depth of a heartbeat's decision again (a tenth of the
// group actor's CPU in a profile of the server under load). Here a mailbox
// runs on one of a few long-lived workers whose stacks stay grown, handed
// over to an idle one; when none is idle it gets a goroutine of its own, as
// before, so that a mailbox never waits for another.
type mailboxDispatcher struct {
	work    chan func()
	done    chan struct{}
	stop    sync.Once
	workers atomic.Int32
	max     int32
}

// mailboxThroughput is the messages a mailbox handles before it yields,
// protoactor's default.
const mailboxThroughput = 300

func newMailboxDispatcher(workers int) *mailboxDispatcher {
	return &mailboxDispatcher{work: make(chan func()), done: make(chan struct{}), max: int32(max(workers, 1))}
}

// Schedule runs fn on an idle worker, a new worker while there are fewer
// than the most, or else a goroutine of its own.
func (d *mailboxDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
		return
	default:
	}
	select {
	case <-d.done:
	default:
		if d.workers.Add(1) <= d.max {
			go d.worker(fn)
			return
		}
		d.workers.Add(-1)
	}
	go fn()
}

// Throughput is how many messages a mailbox handles before it yields.
func (d *mailboxDispatcher) Throughput() int { return mailboxThroughput }

func (d *mailboxDispatcher) worker(fn func()) {
	defer d.workers.Add(-1)
	for {
		fn()
		select {
		case fn = <-d.work:
		case <-d.done:
			return
		}
	}
}

// close lets the workers end once idle; later mailboxes get goroutines of
// their own.
func (d *mailboxDispatcher) close() { d.stop.Do(func() { close(d.done) }) }
