package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// besideResult carries the value of work run beside an actor back to it.
type besideResult[T any] struct{ value T }

// beside starts work on a goroutine of its own, never in an actor's
// mailbox, and returns the future its value arrives on; the actor takes it
// back with ReenterAfter (see streamActor.after) and keeps serving other
// messages meanwhile. The work gets a context that ends after timeout or
// when the coordinator closes, which waits for it.
func beside[T any](e *env, timeout time.Duration, work func(context.Context) T) *actor.Future {
	f := actor.NewFuture(e.system, timeout+time.Second)
	wctx, cancel := context.WithTimeout(e.closing, timeout)
	run := func() {
		defer cancel()
		e.system.Root.Send(f.PID(), besideResult[T]{value: work(wctx)})
	}
	if !e.work.start(run) {
		// The coordinator has closed, and with it wctx: the work gives up
		// at once, and the actor still gets its answer.
		run()
	}
	return f
}

// besideWork is the work running beside the actors, which Close waits for.
// Once it is closed it starts no more, so that nothing is added while Close
// waits (a stream actor still stopping may ask for more).
type besideWork struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// start runs f on a goroutine of its own and reports true, or reports
// false and does nothing once w is closed.
func (w *besideWork) start(f func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.wg.Go(f)
	return true
}

// close refuses new work and returns a channel closed once the work
// started before has ended.
func (w *besideWork) close() <-chan struct{} {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	return done
}

// besideValue is the value of work started by beside, from the future's
// result; an error only when the value never came back.
func besideValue[T any](res any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, fmt.Errorf("work beside the actor: %w", err)
	}
	r, ok := res.(besideResult[T])
	if !ok {
		return zero, fmt.Errorf("work beside the actor: unexpected answer %T, want %T", res, r)
	}
	return r.value, nil
}

// replyValue is the typed reply of an ask from the future's result; an
// answer of another type is an error, never a panic.
func replyValue[T any](res any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	r, ok := res.(reply[T])
	if !ok {
		return zero, fmt.Errorf("unexpected answer %T, want %T", res, r)
	}
	return r.value, r.err
}
