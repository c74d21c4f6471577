package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
)

// waitFuture waits for f, or for ctx to end. It leaves nothing behind: a
// goroutine blocked in f.Wait would outlive a cancelled ctx until the
// future's own timeout, so f pipes its outcome to a process of its own
// instead, which unregisters itself when the outcome comes.
func waitFuture(ctx context.Context, system *actor.ActorSystem, f *actor.Future) error {
	w := &futureWaiter{system: system, done: make(chan struct{})}
	pid, ok := system.ProcessRegistry.Add(w, "wait-"+system.ProcessRegistry.NextId())
	if !ok {
		return fmt.Errorf("wait for %s: the process id is taken", pid)
	}
	f.PipeTo(pid)
	select {
	case <-w.done:
		return f.Wait() // done already: returns at once
	case <-ctx.Done():
		return ctx.Err()
	}
}

// futureWaiter is the process a future pipes its outcome to for
// waitFuture.
type futureWaiter struct {
	system *actor.ActorSystem
	once   sync.Once
	done   chan struct{}
}

// SendUserMessage is the future's outcome (an answer, or its error).
func (w *futureWaiter) SendUserMessage(pid *actor.PID, _ any) {
	w.once.Do(func() {
		w.system.ProcessRegistry.Remove(pid)
		close(w.done)
	})
}

// SendSystemMessage is never sent to a future's pipe.
func (w *futureWaiter) SendSystemMessage(*actor.PID, any) {}

// Stop is never called: the waiter unregisters itself.
func (w *futureWaiter) Stop(*actor.PID) {}

// ask sends msg to pid and waits for the answer, no longer than ctx allows
// and AskTimeout.
func (c *Coordinator) ask(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	return c.askFor(ctx, pid, msg, c.env.cfg.AskTimeout)
}

// askFor is ask with its own timeout instead of AskTimeout.
func (c *Coordinator) askFor(ctx context.Context, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left < timeout {
			timeout = left
		}
	}
	if err := ctx.Err(); err != nil || timeout <= 0 {
		return nil, fmt.Errorf("ask %T: %w", msg, errors.Join(err, context.DeadlineExceeded))
	}
	res, err := c.env.system.Root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("ask %T: %w", msg, err)
	}
	return res, nil
}

// askReply is ask for messages answered with a reply[T].
func askReply[T any](ctx context.Context, c *Coordinator, pid *actor.PID, msg any) (T, error) {
	var zero T
	res, err := c.ask(ctx, pid, msg)
	if err != nil {
		return zero, err
	}
	r, ok := res.(reply[T])
	if !ok {
		return zero, fmt.Errorf("ask %T: unexpected answer %T, want %T", msg, res, r)
	}
	return r.value, r.err
}

func groupAsk[T any](ctx context.Context, c *Coordinator, prefix, group string, msg any) (T, error) {
	var zero T
	pid, err := c.lookup(ctx, prefix, group, nil)
	if err != nil {
		return zero, err
	}
	return askReply[T](ctx, c, pid, msg)
}

// lookup finds a group actor, registering the group first on the fly when
// fly is set and its stream exists.
func (c *Coordinator) lookup(ctx context.Context, prefix, group string, fly *onTheFly) (*actor.PID, error) {
	if err := validateNames(prefix, group); err != nil {
		return nil, err
	}
	stream, pid, failed := c.env.dir.group(prefix, group)
	switch {
	case stream == nil && c.env.dir.moved(prefix):
		return nil, streamMoving(prefix)
	case failed != nil:
		return nil, protocol.Errorf(protocol.CodeStoreUnavailable,
			fmt.Sprintf("stream %q failed closed: its record cannot be read: %v", prefix, failed))
	case pid != nil:
		return pid, nil
	case stream == nil:
		return nil, streamNotFound(prefix)
	case fly == nil:
		return nil, groupNotFound(prefix, group)
	}
	if err := c.mutating(); err != nil {
		return nil, err
	}
	v, err := askReply[ensured](ctx, c, stream, &ensureGroupMsg{name: group, fly: fly})
	if err != nil {
		return nil, err
	}
	return v.pid, nil
}

func (c *Coordinator) streamPID(prefix string) (*actor.PID, error) {
	if err := validateNames(prefix, ""); err != nil {
		return nil, err
	}
	pid := c.env.dir.stream(prefix)
	if pid == nil {
		if c.env.dir.moved(prefix) {
			return nil, streamMoving(prefix)
		}
		return nil, streamNotFound(prefix)
	}
	return pid, nil
}

func (c *Coordinator) mutating() error {
	if c.Terminating() {
		return protocol.Errorf(protocol.CodeCoordinatorTerminating, "the coordinator is shutting down; retry against its successor")
	}
	return nil
}

func invalid(err error) error { return protocol.Errorf(protocol.CodeInvalidRequest, err.Error()) }

func validateNames(prefix, group string) error {
	if err := protocol.ValidateStreamPrefix(prefix); err != nil {
		return invalid(err)
	}
	if group != "" || prefix == "" {
		if err := protocol.ValidateConsumerGroup(group); err != nil {
			return invalid(err)
		}
	}
	return nil
}

func streamNotFound(prefix string) error {
	return protocol.Errorf(protocol.CodeStreamNotFound, fmt.Sprintf("stream %q does not exist", prefix))
}

// streamMoving is the error of a stream this coordinator dropped (cluster
// mode): it is moving to another replica, so the caller retries.
func streamMoving(prefix string) error {
	return protocol.Errorf(protocol.CodeStoreUnavailable,
		fmt.Sprintf("stream %q is moving to another coordinator replica; retry", prefix))
}

func groupNotFound(prefix, group string) error {
	return protocol.Errorf(protocol.CodeGroupNotFound, fmt.Sprintf("group %q of stream %q does not exist", group, prefix))
}
