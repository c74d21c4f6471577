package actors

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// A forced offsets reset holds the shards out of the group's assignment
// (assign.HoldOut) until no member holds them, runs XGROUP SETID beside
// the actor, and has the hold cleared. The actor never waits in its
// mailbox: it checks the holders after every message while a hold waits,
// and answers the reset on its channel. The hold lives in this actor only:
// a coordinator that restarts, or a group reloaded after a failed write,
// forgets it, and the reset waiting on it fails.

// holdShardsMsg asks the group actor to hold shards out of the assignment
// and answer on ready once nobody holds them, or why it gave up. until
// bounds the wait.
type holdShardsMsg struct {
	shards []int
	until  time.Time
	ready  chan holdReply
}

// holdReply answers a holdShardsMsg: the members made to hand off the
// shards, or why the shards could not be freed (the hold is then cleared).
type holdReply struct {
	handedOff []string
	err       error
}

// releaseHoldMsg ends the hold hold asked for (the reset ran, or gave
// up), answered once done. A hold already ended is left alone.
type releaseHoldMsg struct{ hold *holdShardsMsg }

// holdTimeoutMsg is the hold's own timer: the wait for the holders, or
// for the release once they were gone, has run out.
type holdTimeoutMsg struct{ hold *holdShardsMsg }

// shardHold is a group actor's pending hold.
type shardHold struct {
	msg       *holdShardsMsg
	handedOff []string
	// freed is set once ready was answered: the reset runs beside the
	// actor and the hold waits for its release.
	freed bool
	timer *time.Timer
}

// releaseSlack is how long a freed hold waits for its release beyond the
// three Redis timeouts the reset runs under (read, plan, apply), before
// the actor clears it itself.
const releaseSlack = 5 * time.Second

// startHold puts m's shards on hold, or answers why not.
func (a *groupActor) startHold(ctx actor.Context, m *holdShardsMsg) {
	refuse := func(err error) { m.ready <- holdReply{err: err} }
	if err := a.unavailable(); err != nil {
		refuse(err)
		return
	}
	if a.hold != nil {
		refuse(protocol.Errorf(protocol.CodeOffsetsResetInProgress,
			fmt.Sprintf("a forced offsets reset of group %q holds shards %v: retry once it ends", a.name, a.hold.msg.shards)))
		return
	}
	if mg := a.g.ActiveMigration; mg != nil {
		refuse(protocol.Errorf(protocol.CodeActiveMigrationExists,
			fmt.Sprintf("stream %q has migration %s in state %s: a forced reset waits until it ends (complete or roll it back)",
				a.prefix, mg.ReshardingID, mg.State)))
		return
	}
	var handedOff []string
	for _, ids := range a.g.ShardHolders(m.shards) {
		handedOff = append(handedOff, ids...)
	}
	slices.Sort(handedOff)
	a.hold = &shardHold{msg: m, handedOff: slices.Compact(handedOff)}
	a.holdTimer(m.until)
	a.log().Info("holding shards out of the assignment for a forced offsets reset",
		slog.Any("shards", m.shards), slog.Any("members", a.hold.handedOff))
	a.applyHold(ctx, m.shards)
}

// applyHold sets the group's held-out shards and has the change written
// before any answer tells it.
func (a *groupActor) applyHold(ctx actor.Context, shards []int) {
	res := assign.HoldOut(a.g, shards, a.env.now(), a.env.cfg.Group)
	a.finish(StepLayout, res)
	if res.Persist {
		a.dirty = true
		a.changes.Add(res.Changes)
		a.wakeAfterWrite(ctx)
	}
}

// checkHold answers a waiting hold once no member holds its shards in the
// durable state. It runs after every message while a hold waits.
func (a *groupActor) checkHold() {
	h := a.hold
	if h == nil || h.freed || a.dirty || a.g == nil {
		return
	}
	if len(a.g.ShardHolders(h.msg.shards)) > 0 {
		return
	}
	h.freed = true
	h.msg.ready <- holdReply{handedOff: slices.Clone(h.handedOff)}
	a.holdTimer(a.env.now().Add(3*a.env.cfg.RedisTimeout + releaseSlack))
}

// holdTimer (re)arms the hold's timer for at.
func (a *groupActor) holdTimer(at time.Time) {
	h := a.hold
	if h.timer != nil {
		h.timer.Stop()
	}
	self, root, msg := a.self, a.env.system.Root, h.msg
	h.timer = time.AfterFunc(max(at.Sub(a.env.now()), 0), func() { root.Send(self, &holdTimeoutMsg{hold: msg}) })
}

// holdTimedOut ends the hold whose timer fired: a reset still waiting is
// answered with the members that still hold its shards.
func (a *groupActor) holdTimedOut(ctx actor.Context, m *holdTimeoutMsg) {
	h := a.hold
	if h == nil || h.msg != m.hold {
		return
	}
	if h.freed {
		a.log().Warn("a forced offsets reset did not release its hold in time; releasing it", slog.Any("shards", h.msg.shards))
		a.endHold(ctx, nil)
		return
	}
	var busy []string
	if a.g != nil {
		holders := a.g.ShardHolders(h.msg.shards)
		for _, s := range h.msg.shards {
			if ids := holders[s]; len(ids) > 0 {
				busy = append(busy, fmt.Sprintf("%d (%s)", s, strings.Join(ids, ", ")))
			}
		}
	}
	a.endHold(ctx, protocol.Errorf(protocol.CodeGroupHasActiveMembers,
		fmt.Sprintf("members of group %q still hold shards %s after the forced reset's wait: nothing was reset, and the shards are given out again",
			a.name, strings.Join(busy, "; "))))
}

// endHold clears the pending hold; a reset still waiting for it is
// answered err. The group gives the shards out again.
func (a *groupActor) endHold(ctx actor.Context, err error) {
	h := a.clearHold(err)
	if h == nil {
		return
	}
	if a.g != nil && a.failed == nil && !a.deleted && len(a.g.HeldOut()) > 0 {
		a.log().Info("shards given out again after a forced offsets reset", slog.Any("shards", h.msg.shards))
		a.applyHold(ctx, nil)
	}
}

// dropHold answers a waiting reset with code and why when the actor can no
// longer keep its hold (it stops, restarts, fails closed or the group is
// deleted): the group it keeps, if any, holds nothing out.
func (a *groupActor) dropHold(code protocol.ErrorCode, why string) {
	a.clearHold(protocol.Errorf(code, fmt.Sprintf("forced offsets reset of group %q: %s; nothing was reset", a.name, why)))
}

// clearHold forgets the pending hold, if any, and answers a reset still
// waiting for it err. It returns the hold it cleared.
func (a *groupActor) clearHold(err error) *shardHold {
	h := a.hold
	if h == nil {
		return nil
	}
	a.hold = nil
	if h.timer != nil {
		h.timer.Stop()
	}
	if !h.freed {
		h.msg.ready <- holdReply{err: err}
	}
	return h
}
