package member

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Reason says why shards were assigned to a member or taken from it.
type Reason string

// Reasons of [ShardChange].
const (
	// ReasonAssigned: the coordinator granted the shards.
	ReasonAssigned Reason = "assigned"
	// ReasonResumed: reads resume on owned shards after a lapsed lease
	// was renewed.
	ReasonResumed Reason = "resumed"
	// ReasonRevoked: the coordinator moved the shards to another member;
	// reads stopped and the member's handlers finished (or were cut at the
	// drain deadline) before the hook.
	ReasonRevoked Reason = "revoked"
	// ReasonLeaving: the member leaves the group (Run's context ended);
	// drained as for ReasonRevoked.
	ReasonLeaving Reason = "leaving"
	// ReasonRedisFailed: Redis failed WithRedisFailureLimit reads in a
	// row; the member gives its shards back (drained as for
	// ReasonRevoked) and rejoins once Redis answers.
	ReasonRedisFailed Reason = "redis failed"
	// ReasonFenced: the coordinator fenced the member or no longer knows
	// it, or the member failed: reads and ACKs stopped at once, records in
	// flight were abandoned (they stay pending for the next owner).
	ReasonFenced Reason = "fenced"
	// ReasonLeaseLost: no heartbeat succeeded for the member lease: reads
	// and ACKs stopped at once, as for ReasonFenced. The shards may come
	// back with ReasonResumed.
	ReasonLeaseLost Reason = "lease lost"
)

// Lost reports whether the shards were lost rather than given up: reads
// and ACKs stopped at once and records in flight were abandoned.
func (r Reason) Lost() bool { return r == ReasonFenced || r == ReasonLeaseLost }

// ShardChange is a set of shards a member starts or stops reading.
type ShardChange struct {
	MemberID string
	// Shards are sorted shard indexes, never empty.
	Shards []int
	Reason Reason
}

// HeartbeatEvent is the outcome of one heartbeat.
type HeartbeatEvent struct {
	MemberID string
	// Status is the answer's status ("" when Err is set).
	Status string
	// ErrorCode is the answer's errorCode, if any (docs/protocol.md §9.7).
	ErrorCode string
	Epoch     int64
	// Assigned and Pending are the answer's shard sets.
	Assigned, Pending []int
	// Latency is the time from send to answer.
	Latency time.Duration
	// Err is set when no answer came (transport error, non-2xx).
	Err error
}

// HandlerError is a failed handler call: an error it returned, or a
// panic (recovered; Stack is then set). It is an error itself, which
// unwraps to Err.
type HandlerError struct {
	// Messages are the records of the call: one, or a batch.
	Messages []*Message
	// Err is what the handler returned, wrapped, or the panic: a panic
	// with an error wraps that error, so errors.Is and errors.As see it.
	Err error
	// Stack is the stack of the goroutine that panicked, as
	// runtime/debug.Stack formats it, when the handler panicked; nil when
	// it returned an error. The runtime also logs it once, at ERROR.
	Stack []byte
	// Attempt counts calls for these records, from 1.
	Attempt int
	// Retry: the records are handed to the handler again after a delay
	// (WithHandlerRetry). False: they are left pending (a Nack), or
	// dead-lettered (WithDeadLetter).
	Retry bool
}

// Error names the first record, the attempt and the cause.
func (e *HandlerError) Error() string {
	if len(e.Messages) == 0 {
		return fmt.Sprintf("member: handler failed (attempt %d): %v", e.Attempt, e.Err)
	}
	m := e.Messages[0]
	return fmt.Sprintf("member: handler failed on %s %s (%d records, attempt %d): %v",
		m.StreamKey, m.ID, len(e.Messages), e.Attempt, e.Err)
}

// Unwrap returns Err.
func (e *HandlerError) Unwrap() error { return e.Err }

// Hooks are optional callbacks on what a Runtime does; nil fields are
// skipped. Hooks never run concurrently with each other, not even for
// different members of one Runtime, except OnHandlerError, which runs on
// the worker that called the handler. The others run on the member's
// heartbeat loop: a slow hook delays heartbeats and can cost the member
// its lease, and calling Run or waiting for Run inside one deadlocks.
// A panic in a hook is recovered and logged. [MemberID] on ctx names the
// member.
type Hooks struct {
	// OnAssigned is called with shards the member is about to read, once
	// per answer that grants some, before the first read.
	OnAssigned func(ctx context.Context, c ShardChange)
	// OnRevoked is called with shards the member no longer reads, once
	// per set: after a revocation (or a leave) once reads stopped and the
	// handlers of all of them returned, before the coordinator is told;
	// on fencing and lease loss at once, after reads and ACKs stopped
	// (c.Reason.Lost()). When it returns, readers of your own of those
	// shards must have stopped.
	OnRevoked func(ctx context.Context, c ShardChange)
	// OnLeaseLost is called when the member's lease lapses (before
	// OnRevoked with ReasonLeaseLost).
	OnLeaseLost func(ctx context.Context, memberID string)
	// OnHeartbeat is called with every heartbeat outcome.
	OnHeartbeat func(ctx context.Context, e HeartbeatEvent)
	// OnHandlerError is called, on the worker, for every handler call
	// that returned an error or panicked (e.Stack then holds the stack).
	OnHandlerError func(ctx context.Context, e *HandlerError)
	// OnDeadLetter is called, on the worker, for every record moved to the
	// dead-letter stream (WithDeadLetter), after it was acknowledged.
	OnDeadLetter func(ctx context.Context, d DeadLetter)
}

// WithHooks sets the Runtime's hooks (see [Hooks]). It may be combined
// with WithOnAssigned and WithOnRevoked: both are called.
func WithHooks(h Hooks) Opt {
	return optFunc(func(c *config) { c.hooks = h })
}

// hooks calls the hooks of one Runtime, one call at a time across all its
// members (doc.go rule 12), and turns a panicking hook into a logged error.
type hooks struct {
	mu         sync.Mutex
	h          Hooks
	onAssigned func(ctx context.Context, shards []int)
	onRevoked  func(ctx context.Context, shards []int)
	log        *slog.Logger
}

func (h *hooks) assigned(ctx context.Context, shards []int, reason Reason) {
	if len(shards) == 0 {
		return
	}
	c := ShardChange{MemberID: MemberID(ctx), Shards: slices.Sorted(slices.Values(shards)), Reason: reason}
	h.call(ctx, "OnAssigned", func() {
		if h.h.OnAssigned != nil {
			h.h.OnAssigned(ctx, c)
		}
		if h.onAssigned != nil {
			h.onAssigned(ctx, slices.Clone(c.Shards))
		}
	})
}

func (h *hooks) revoked(ctx context.Context, shards []int, reason Reason) {
	if len(shards) == 0 {
		return
	}
	c := ShardChange{MemberID: MemberID(ctx), Shards: slices.Sorted(slices.Values(shards)), Reason: reason}
	h.call(ctx, "OnRevoked", func() {
		if h.h.OnRevoked != nil {
			h.h.OnRevoked(ctx, c)
		}
		if h.onRevoked != nil {
			h.onRevoked(ctx, slices.Clone(c.Shards))
		}
	})
}

func (h *hooks) leaseLost(ctx context.Context) {
	if h.h.OnLeaseLost != nil {
		h.call(ctx, "OnLeaseLost", func() { h.h.OnLeaseLost(ctx, MemberID(ctx)) })
	}
}

func (h *hooks) heartbeat(ctx context.Context, e HeartbeatEvent) {
	if h.h.OnHeartbeat != nil {
		h.call(ctx, "OnHeartbeat", func() { h.h.OnHeartbeat(ctx, e) })
	}
}

// handlerError runs on a worker, outside the lock: workers must not wait
// for each other's hooks.
func (h *hooks) handlerError(ctx context.Context, e *HandlerError) {
	if h.h.OnHandlerError == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("hook panicked", slog.String("hook", "OnHandlerError"), slog.String("member", MemberID(ctx)),
				slog.Any("panic", p))
		}
	}()
	h.h.OnHandlerError(ctx, e)
}

// deadLetter runs on a worker, outside the lock, as handlerError does.
func (h *hooks) deadLetter(ctx context.Context, d DeadLetter) {
	if h.h.OnDeadLetter == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("hook panicked", slog.String("hook", "OnDeadLetter"), slog.String("member", MemberID(ctx)),
				slog.Any("panic", p))
		}
	}()
	h.h.OnDeadLetter(ctx, d)
}

func (h *hooks) call(ctx context.Context, name string, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("hook panicked", slog.String("hook", name), slog.String("member", MemberID(ctx)),
				slog.Any("panic", p))
		}
	}()
	fn()
}
