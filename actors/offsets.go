package actors

import (
	"context"
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
// A member that joins while the reset runs reads from wherever Redis
// stands when it starts.
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
	rctx, cancel := context.WithTimeout(ctx, c.env.cfg.RedisTimeout)
	defer cancel()
	out := protocol.OffsetsResetResponse{StreamPrefix: prefix, ConsumerGroup: group, To: req.To, Shards: make([]protocol.OffsetReset, len(reads))}
	var busy []string
	for i, rd := range reads {
		key := protocol.StreamKey(prefix, rd.index)
		row := protocol.OffsetReset{ShardIndex: rd.index, StreamKey: key, Owners: holders[rd.index]}
		if row.Owners == nil {
			row.Owners = []string{}
		} else {
			busy = append(busy, fmt.Sprintf("%d (%s)", rd.index, strings.Join(row.Owners, ", ")))
		}
		if g := rd.facts.Group(group); g != nil {
			row.CurrentLastDeliveredID = g.LastDeliveredID
		}
		if row.NewLastDeliveredID, err = c.resetID(rctx, key, rd.facts, target); err != nil {
			return zero, err
		}
		out.Shards[i] = row
	}
	if !req.Execute {
		return out, nil
	}
	if len(busy) > 0 {
		return zero, protocol.Errorf(protocol.CodeGroupHasActiveMembers,
			fmt.Sprintf("members of group %q read shards %s: stop them (or wait for their leases to lapse), then reset", group, strings.Join(busy, "; ")))
	}
	for i := range out.Shards {
		row := &out.Shards[i]
		if row.CurrentLastDeliveredID == "" {
			// The group is missing on the key (deleted by hand): create
			// it where the reset asks, as provisioning would have.
			if err := c.env.cfg.Redis.Provision(rctx, []string{row.StreamKey}, []string{group}); err != nil {
				return zero, redisUnavailable(row.StreamKey, err)
			}
		}
		if err := c.env.cfg.Redis.SetGroupID(rctx, row.StreamKey, group, row.NewLastDeliveredID); err != nil {
			return zero, redisUnavailable(row.StreamKey, err)
		}
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
