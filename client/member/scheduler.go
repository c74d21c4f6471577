package member

import (
	"sync"
	"time"
)

// scheduler runs one logical member's workers (runtimeMaxConcurrency of
// them) over the shards that have records ready.
//
// Fairness rule (doc.go rule 11): a shard with ready records waits in one FIFO queue; a
// worker takes the shard at the head, handles exactly one record of it, and
// puts the shard back at the tail if it has more. So with more shards than
// workers every shard with ready records is served once per round, and no
// shard starves however much another one holds.
//
// Order rule: a shard is in the queue or held by a worker, never both and
// never by two workers, so one shard's records are handled one at a time,
// in the order they were read.
//
// Lock order: a shardRun's mu may be taken while holding nothing; the
// scheduler's mu is never held while taking a shardRun's mu.
type scheduler struct {
	mu     sync.Mutex
	cond   *sync.Cond
	ready  []*shardRun
	closed bool
	busy   int
	size   int
	// take is how many records of a shard a worker takes per turn: 1
	// for a Handler, every queued one (0) for a BatchHandler.
	take int
	wg   sync.WaitGroup
}

func newScheduler(workers, take int) *scheduler {
	s := &scheduler{size: workers, take: take}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// start runs the workers; each calls handle for one record at a time until
// close. The owner (the member actor) calls close and then wait.
func (s *scheduler) start(handle func(*shardRun, []*Message)) {
	for range s.size {
		s.wg.Add(1)
		go s.work(handle)
	}
}

func (s *scheduler) work(handle func(*shardRun, []*Message)) {
	defer s.wg.Done()
	for {
		run := s.next()
		if run == nil {
			return
		}
		for run != nil {
			msgs := run.take(s.take)
			if len(msgs) == 0 {
				break
			}
			handle(run, msgs)
			if !run.finish(len(msgs)) {
				break
			}
			run = s.rotate(run)
		}
		s.mu.Lock()
		s.busy--
		s.mu.Unlock()
	}
}

// rotate puts run, which has more records, at the tail and returns the
// shard at the head for the same worker to go on with (run itself when no
// other shard waits): what push and next do, without waking another
// worker or going idle in between. It returns nil once closed.
func (s *scheduler) rotate(run *shardRun) *shardRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if len(s.ready) == 0 {
		return run
	}
	s.ready = append(s.ready, run)
	head := s.ready[0]
	s.ready[0] = nil
	s.ready = s.ready[1:]
	return head
}

// next blocks until a shard is ready or the scheduler is closed (nil).
func (s *scheduler) next() *shardRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ready) == 0 && !s.closed {
		s.cond.Wait()
	}
	if s.closed {
		return nil
	}
	run := s.ready[0]
	s.ready[0] = nil
	s.ready = s.ready[1:]
	s.busy++
	return run
}

// push queues a shard that has records ready, at the tail.
func (s *scheduler) push(run *shardRun) {
	s.mu.Lock()
	if !s.closed {
		s.ready = append(s.ready, run)
		s.cond.Signal()
	}
	s.mu.Unlock()
}

// available is the number of idle workers (availableConcurrency).
func (s *scheduler) available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size - s.busy
}

// close makes idle workers return at once and busy ones after their
// current record; queued records are left (they stay pending in Redis).
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	s.ready = nil
	s.cond.Broadcast()
	s.mu.Unlock()
}

// wait waits up to d for every worker to return and reports whether they
// did. A handler that ignores its cancelled context keeps its worker.
func (s *scheduler) wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { // ends when the workers do; owned by this call
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
