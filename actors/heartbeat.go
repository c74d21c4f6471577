package actors

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// registerWait bounds how long a join waits for its group to be registered
// before it is answered RETRY.
const registerWait = time.Second

// Heartbeat runs one member heartbeat (docs/protocol.md §6.1). It always answers
// a response: failures of the coordinator itself are RETRY, so that a
// member keeps its shards and tries again. It is the one owner of the
// answer: the group's decision, or a refusal (its own or the group
// actor's) answered by assign.Refusal.Answer.
func (c *Coordinator) Heartbeat(ctx context.Context, prefix, group, memberID string, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse {
	resp, refusal := c.heartbeat(ctx, prefix, group, memberID, req)
	if !refusal.Refused() {
		return resp
	}
	if req == nil {
		req = &protocol.HeartbeatRequest{MemberID: memberID}
	}
	return refusal.Answer(req, c.env.cfg.Group)
}

// heartbeat is Heartbeat's decision: the group's answer, or why there is
// none.
func (c *Coordinator) heartbeat(ctx context.Context, prefix, group, memberID string, req *protocol.HeartbeatRequest) (protocol.HeartbeatResponse, assign.Refusal) {
	var none protocol.HeartbeatResponse
	if r := assign.Validate(req, memberID); r.Refused() {
		return none, r
	}
	if err := validateNames(prefix, group); err != nil {
		return none, assign.Invalid(err.Error())
	}
	if c.Terminating() {
		return none, assign.Retry()
	}
	var fly *onTheFly
	lctx := ctx
	if c.env.cfg.AutoCreateGroups && req.MemberEpoch == protocol.EpochJoin {
		fly = &onTheFly{by: callerOf(ctx), via: viaJoin}
		// Registering a group provisions its shard streams in Redis; a
		// member is not kept waiting on a slow Redis for that: RETRY, and
		// the registration goes on for its next join.
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, registerWait)
		defer cancel()
	}
	pid, err := c.lookup(lctx, prefix, group, fly)
	if err != nil {
		var perr *protocol.Error
		if errors.As(err, &perr) && (perr.Code == protocol.CodeStreamNotFound || perr.Code == protocol.CodeGroupNotFound) {
			return none, assign.Unknown(perr.Code, perr.Message)
		}
		if errors.As(err, &perr) && perr.Code == protocol.CodeGroupLimitReached {
			// The stream actor logged the refusal (rate limited); a
			// member retries its join at the heartbeat interval.
			return none, assign.RetryBecause(perr.Code, perr.Message)
		}
		c.env.warn.Warn("heartbeat answered RETRY", prefix+"\x00"+group, slog.String("stream", prefix), slog.String("group", group), slog.Any("error", err))
		return none, assign.Retry()
	}
	answer, err := c.askHeartbeat(ctx, pid, req)
	if err != nil {
		if ctx.Err() == nil {
			c.env.warn.Warn("heartbeat answered RETRY", prefix+"\x00"+group, slog.String("stream", prefix), slog.String("group", group), slog.Any("error", err))
		}
		return none, assign.Retry()
	}
	return answer.resp, answer.refusal
}

// askHeartbeat hands req to the group actor pid and waits for its answer,
// at most the heartbeat's budget, and no longer than ctx (the client gone).
func (c *Coordinator) askHeartbeat(ctx context.Context, pid *actor.PID, req *protocol.HeartbeatRequest) (heartbeatAnswer, error) {
	proc, live := c.env.system.ProcessRegistry.Get(pid)
	if !live {
		// The group actor stopped since the lookup (the group was deleted
		// or moved to another replica). A future would have had the dead
		// letter's answer at once; a channel has none to wait for.
		return heartbeatAnswer{}, errors.New("the group actor stopped")
	}
	to := make(answerTo, 1)
	proc.SendUserMessage(pid, &heartbeatMsg{req: req, to: to, gone: ctx.Done(), origin: originOf(ctx)})
	timeout := c.env.budgetTimer(c.HeartbeatBudget(req))
	defer c.env.timers.Put(timeout)
	defer timeout.Stop()
	select {
	case answer := <-to:
		return answer, nil
	case <-ctx.Done():
		return heartbeatAnswer{}, ctx.Err()
	case <-timeout.C:
		return heartbeatAnswer{}, errors.New("the group actor did not answer within the heartbeat budget")
	}
}

// HeartbeatBudget is how long answering req may take: the ask timeout, plus
// the time a held heartbeat (waitMs) may be held. The HTTP layer keeps its
// write deadline past it, so that a held answer is not cut.
func (c *Coordinator) HeartbeatBudget(req *protocol.HeartbeatRequest) time.Duration {
	return c.env.cfg.AskTimeout + MaxHold(req, c.env.cfg.Group)
}

// MaxHold is the longest a group may hold the answer to req: its waitMs,
// at most the heartbeat interval (docs/protocol.md §9.5).
func MaxHold(req *protocol.HeartbeatRequest, cfg assign.Config) time.Duration {
	if req.WaitMs <= 0 {
		return 0
	}
	return time.Duration(min(req.WaitMs, cfg.HeartbeatInterval.Milliseconds())) * time.Millisecond
}

// GroupConfig is the timing every group runs with.
func (c *Coordinator) GroupConfig() assign.Config { return c.env.cfg.Group }

// budgetTimer is a stopped timer of env's pool reset to fire after d: a
// heartbeat's wait for its group actor needs one, and a new one is two
// allocations per heartbeat. Since Go 1.23 a timer stopped or reset
// delivers nothing of its earlier schedule, so a reused one is as good
// as new.
func (e *env) budgetTimer(d time.Duration) *time.Timer {
	if t, ok := e.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}
