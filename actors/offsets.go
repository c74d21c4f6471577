package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/clienttext"
)

// holdersMsg asks a group actor which members read, or may start to
// read, each of shards (assign's ShardHolders).
type holdersMsg struct{ shards []int }

// resetTarget is a validated OffsetsResetRequest: where to move the group.
type resetTarget struct {
	to string
	// at is TIME's moment in Unix milliseconds; id is ID's entry id.
	at int64
	id string
}

// parseResetTarget checks that req names one place to move to, and what
// that place needs.
func parseResetTarget(req protocol.OffsetsResetRequest) (resetTarget, error) {
	t := resetTarget{to: req.To}
	switch req.To {
	case protocol.ResetToEarliest, protocol.ResetToLatest:
	case protocol.ResetToTime:
		at, err := time.Parse(time.RFC3339Nano, req.Time)
		if err != nil {
			return t, protocol.Errorf(protocol.CodeInvalidRequest,
				fmt.Sprintf("time %s is not an RFC 3339 time (2026-01-02T15:04:05Z)", clienttext.Quote(req.Time)))
		}
		if t.at = at.UnixMilli(); t.at < 0 {
			return t, protocol.Errorf(protocol.CodeInvalidRequest, "time is before 1970: no stream entry is older")
		}
	case protocol.ResetToID:
		if !validEntryID(req.ID) {
			return t, protocol.Errorf(protocol.CodeInvalidRequest,
				fmt.Sprintf("id %s is not a stream entry id (ms-seq)", clienttext.Quote(req.ID)))
		}
		t.id = req.ID
	default:
		return t, protocol.Errorf(protocol.CodeInvalidRequest,
			fmt.Sprintf("to %s is none of EARLIEST, LATEST, TIME, ID", clienttext.Quote(req.To)))
	}
	if req.To != protocol.ResetToTime && req.Time != "" || req.To != protocol.ResetToID && req.ID != "" {
		return t, protocol.Errorf(protocol.CodeInvalidRequest, "time goes with to TIME only, id with to ID only")
	}
	return t, nil
}

// ResetOffsets plans, and with req.Execute applies, a move of the group's
// last delivered id (XGROUP SETID) on the stream's readable shards, or on
// req.Shards. The pending entries stay where they are. An executed reset
// is refused while a member reads, or may still read, one of the shards
// (409 GROUP_HAS_ACTIVE_MEMBERS): the members must stop first, and a
// reset under a live reader would land at no telling point of its reads.
// With req.Force it runs under live members instead (forceReset). A
// member that joins while the reset runs reads from wherever Redis stands
// when it starts.
func (c *Coordinator) ResetOffsets(ctx context.Context, prefix, group string, req protocol.OffsetsResetRequest) (protocol.OffsetsResetResponse, error) {
	var zero protocol.OffsetsResetResponse
	if err := c.mutating(); err != nil {
		return zero, err
	}
	if err := requireRequestedBy(req.RequestedBy); err != nil {
		return zero, err
	}
	target, err := parseResetTarget(req)
	if err != nil {
		return zero, err
	}
	reads, _, err := c.readShards(ctx, prefix, group)
	if err != nil {
		return zero, err
	}
	reads, err = pickShards(reads, req.Shards, prefix)
	if err != nil {
		return zero, err
	}
	indexes := make([]int, len(reads))
	for i, rd := range reads {
		indexes[i] = rd.index
	}
	holders, err := groupAsk[map[int][]string](ctx, c, prefix, group, &holdersMsg{shards: indexes})
	if err != nil {
		return zero, err
	}
	out, err := c.planReset(ctx, prefix, group, req.To, reads, holders, target)
	if err != nil {
		return zero, err
	}
	var busy []string
	for _, row := range out.Shards {
		if len(row.Owners) > 0 {
			busy = append(busy, fmt.Sprintf("%d (%s)", row.ShardIndex, strings.Join(row.Owners, ", ")))
			if req.Force {
				out.HandedOff = append(out.HandedOff, row.Owners...)
			}
		}
	}
	slices.Sort(out.HandedOff)
	out.HandedOff = slices.Compact(out.HandedOff)
	switch {
	case !req.Execute:
		return out, nil
	case req.Force:
		return c.forceReset(ctx, prefix, group, out, indexes, target)
	case len(busy) > 0:
		return zero, protocol.Errorf(protocol.CodeGroupHasActiveMembers,
			fmt.Sprintf("members of group %q read shards %s: stop them (or wait for their leases to lapse), or reset with force", group, strings.Join(busy, "; ")))
	}
	if err := c.applyReset(ctx, group, out.Shards); err != nil {
		return zero, err
	}
	out.Executed = true
	return out, nil
}

// planReset reads where the group stands on each of reads and where target
// moves it; holders name each shard's readers.
func (c *Coordinator) planReset(ctx context.Context, prefix, group, to string, reads []shardRead, holders map[int][]string, target resetTarget) (protocol.OffsetsResetResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
	defer cancel()
	out := protocol.OffsetsResetResponse{StreamPrefix: prefix, ConsumerGroup: group, To: to,
		Shards: make([]protocol.OffsetReset, len(reads)), HandedOff: []string{}}
	for i, rd := range reads {
		key := protocol.StreamKey(prefix, rd.index)
		row := protocol.OffsetReset{ShardIndex: rd.index, StreamKey: key, Owners: holders[rd.index]}
		if row.Owners == nil {
			row.Owners = []string{}
		}
		if g := rd.facts.Group(group); g != nil {
			row.CurrentLastDeliveredID = g.LastDeliveredID
		}
		var err error
		if row.NewLastDeliveredID, err = c.resetID(rctx, key, rd.facts, target); err != nil {
			return out, err
		}
		out.Shards[i] = row
	}
	return out, nil
}

// applyReset moves the group to each row's new last delivered id.
func (c *Coordinator) applyReset(ctx context.Context, group string, rows []protocol.OffsetReset) error {
	rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
	defer cancel()
	for _, row := range rows {
		if row.CurrentLastDeliveredID == "" {
			// The group is missing on the key (deleted by hand): create
			// it where the reset asks, as provisioning would have.
			if err := c.env.cfg.Redis.Provision(rctx, []string{row.StreamKey}, []string{group}); err != nil {
				return redisUnavailable(row.StreamKey, err)
			}
		}
		if err := c.env.cfg.Redis.SetGroupID(rctx, row.StreamKey, group, row.NewLastDeliveredID); err != nil {
			return redisUnavailable(row.StreamKey, err)
		}
	}
	return nil
}

// forceReset runs an executed reset under live members: the group actor
// holds the shards out of the assignment, so their readers hand them off
// by the ordinary rule (docs/protocol.md §9.1), and answers once nobody
// holds them; then the reset is planned again (LATEST means the last entry
// when it runs, and the members' last reads moved the group) and applied,
// and the hold is released whatever happened. The wait is bounded by the
// hand-off bound of the group's timing and by ctx.
func (c *Coordinator) forceReset(ctx context.Context, prefix, group string, planned protocol.OffsetsResetResponse, indexes []int, target resetTarget) (protocol.OffsetsResetResponse, error) {
	var zero protocol.OffsetsResetResponse
	pid, err := c.lookup(ctx, prefix, group, nil)
	if err != nil {
		return zero, err
	}
	now := c.env.now()
	until := now.Add(c.env.cfg.Group.HandOffBound())
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		// The actor gives up a little before the request does, so that
		// the answer says who still holds the shards.
		until = d.Add(-min(d.Sub(now)/10, time.Second))
	}
	hold := &holdShardsMsg{shards: indexes, until: until, ready: make(chan holdReply, 1)}
	c.env.system.Root.Send(pid, hold)
	// Released whatever happens, and before the answer, so that a forced
	// reset asked right after this one finds the shards given out again.
	// The actor ignores the release of a hold that already ended, and
	// clears a hold nobody releases itself.
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), c.env.cfg.AskTimeout)
		defer cancel()
		_, _ = askReply[struct{}](rctx, c, pid, &releaseHoldMsg{hold: hold})
	}()
	var got holdReply
	wait := time.NewTimer(until.Sub(c.env.now()) + time.Second)
	defer wait.Stop()
	select {
	case got = <-hold.ready:
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return zero, ctx.Err()
		}
		// The actor gives up at until, about now: its answer names who
		// still holds the shards.
		select {
		case got = <-hold.ready:
		case <-wait.C:
			return zero, ctx.Err()
		}
		if got.err == nil {
			return zero, ctx.Err()
		}
	case <-wait.C:
		// The actor answers at until; it did not (it restarted and lost
		// the hold with its state).
		return zero, protocol.Errorf(protocol.CodeStoreUnavailable,
			fmt.Sprintf("forced offsets reset of group %q: the group did not answer; nothing was reset", group))
	}
	if got.err != nil {
		return zero, got.err
	}
	reads, _, err := c.readShards(ctx, prefix, group)
	if err != nil {
		return zero, err
	}
	if reads, err = pickShards(reads, indexes, prefix); err != nil {
		return zero, err
	}
	owners := map[int][]string{}
	for _, row := range planned.Shards {
		owners[row.ShardIndex] = row.Owners
	}
	out, err := c.planReset(ctx, prefix, group, planned.To, reads, owners, target)
	if err != nil {
		return zero, err
	}
	if err := c.applyReset(ctx, group, out.Shards); err != nil {
		return zero, err
	}
	out.HandedOff = got.handedOff
	if out.HandedOff == nil {
		out.HandedOff = []string{}
	}
	out.Executed = true
	return out, nil
}

// pickShards keeps the reads of the shards asked for, all when none is;
// a shard that is not readable is a client's mistake.
func pickShards(reads []shardRead, shards []int, prefix string) ([]shardRead, error) {
	if len(shards) == 0 {
		return reads, nil
	}
	var out []shardRead
	for _, s := range shards {
		i := slices.IndexFunc(reads, func(rd shardRead) bool { return rd.index == s })
		if i < 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidRequest, fmt.Sprintf("shard %d is not a readable shard of stream %q", s, prefix))
		}
		if !slices.ContainsFunc(out, func(rd shardRead) bool { return rd.index == s }) {
			out = append(out, reads[i])
		}
	}
	return out, nil
}

// resetID is the last delivered id target moves a group to on key.
func (c *Coordinator) resetID(ctx context.Context, key string, f ShardFacts, target resetTarget) (string, error) {
	switch target.to {
	case protocol.ResetToEarliest:
		return "0-0", nil
	case protocol.ResetToLatest:
		if f.LastGeneratedID == "" {
			return "0-0", nil
		}
		return f.LastGeneratedID, nil
	case protocol.ResetToID:
		return target.id, nil
	}
	// TIME: the newest entry older than the moment, so that the first
	// entry read next is the first one added at or after it.
	before, err := c.env.cfg.Redis.Range(ctx, key, strconv.FormatInt(target.at, 10)+"-0", 1, true)
	if err != nil {
		return "", redisUnavailable(key, err)
	}
	if len(before) == 0 {
		return "0-0", nil
	}
	return before[0].ID, nil
}
