package gateway

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// shardView is one group's shards as the reference design's monitoring
// shows them: Redis's facts (one live read), the owners the group reports
// and targets, what the owners last reported reading, and the memory the
// background metrics collection last sampled.
type shardView struct {
	group   protocol.GroupResponse
	shards  protocol.ShardsResponse
	offsets []protocol.StreamShardOffset
	// targets are the members whose target holds each shard, sorted.
	targets map[int][]string
	rates   map[int]shardRate
}

// readShardView reads g's shards. It fails as Shards does: 503 without
// Redis or while Redis does not answer.
func (s *server) readShardView(ctx context.Context, g protocol.GroupResponse) (shardView, error) {
	sh, err := s.coord.Shards(ctx, g.StreamPrefix, g.ConsumerGroup)
	if err != nil {
		return shardView{}, err
	}
	v := shardView{group: g, shards: sh, targets: map[int][]string{}}
	if as, err := s.coord.Assignments(ctx, g.StreamPrefix, g.ConsumerGroup); err == nil {
		for m, shards := range as.TargetAssignment {
			for _, x := range shards {
				v.targets[x.ShardIndex] = append(v.targets[x.ShardIndex], m)
			}
		}
		for _, l := range v.targets {
			sort.Strings(l)
		}
	}
	progress := map[int]protocol.ShardProgress{}
	if ms, err := s.coord.Members(ctx, g.StreamPrefix, g.ConsumerGroup); err == nil {
		progress = ownersProgress(ms.Members)
	}
	memory := s.metrics.ShardMemoryOf(g.StreamPrefix)
	for i := range sh.Shards {
		st := &sh.Shards[i]
		if b, ok := memory[st.ShardIndex]; ok && st.Exists {
			st.MemoryUsageBytes = &b
		}
		v.offsets = append(v.offsets, referenceOffset(sh, *st, progress[st.ShardIndex]))
	}
	v.rates = s.rates.observe(g.StreamPrefix, g.ConsumerGroup, sh.Shards, time.Now())
	return v, nil
}

// ownersProgress keeps, per shard, the newest progress a member reading it
// reported.
func ownersProgress(members []protocol.Member) map[int]protocol.ShardProgress {
	out := map[int]protocol.ShardProgress{}
	for _, m := range members {
		reads := map[int]bool{}
		for _, x := range m.CurrentAssignment {
			reads[x.ShardIndex] = true
		}
		for _, p := range m.ShardProgress {
			i := p.Shard.ShardIndex
			if cur, ok := out[i]; reads[i] && (!ok || p.UpdatedAt.After(cur.UpdatedAt)) {
				out[i] = p
			}
		}
	}
	return out
}

// referenceOffset is st in the reference design's form.
func referenceOffset(sh protocol.ShardsResponse, st protocol.ShardState, p protocol.ShardProgress) protocol.StreamShardOffset {
	owners := append([]string{}, st.Owners...)
	return protocol.StreamShardOffset{
		StreamPrefix: sh.StreamPrefix, ConsumerGroup: sh.ConsumerGroup, Shard: protocol.Shard{ShardIndex: st.ShardIndex},
		StreamKey: st.StreamKey, RedisSlot: st.RedisSlot, StreamLength: st.Length,
		FirstRecordID: orNull(st.FirstRecordID), LastRecordID: orNull(st.LastRecordID), LastGeneratedID: orNull(st.LastGeneratedID),
		GroupLastDeliveredID: orNull(st.GroupLastDeliveredID), ConsumerLastDeliveredID: orNull(p.LastDeliveredID),
		ConsumerLastAckedID: orNull(p.LastAckedID), PendingCount: st.Pending, Lag: st.Lag,
		MemoryUsageBytes: st.MemoryUsageBytes, OwnerMemberIDs: owners,
	}
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// offsetTotals fills the reference design's totals of resp.Shards.
func offsetTotals(resp *protocol.OffsetsResponse) {
	var lag int64
	lagKnown := true
	resp.MemoryUsageKnown = true
	for _, o := range resp.Shards {
		resp.TotalStreamLength += o.StreamLength
		resp.TotalPendingCount += o.PendingCount
		if o.Lag == nil {
			lagKnown = false
		} else {
			lag += *o.Lag
		}
		if o.MemoryUsageBytes == nil {
			resp.MemoryUsageKnown = false
		} else {
			resp.TotalMemoryUsageBytes += *o.MemoryUsageBytes
		}
	}
	if lagKnown {
		resp.TotalLag = &lag
	}
}

// shardRate is how fast a shard grew (producedPerSecond) and how fast its
// group caught up (consumedPerSecond: growth minus the lag's growth);
// nil until two observations a second apart exist, or while the lag is
// unknown.
type shardRate struct {
	produced, consumed *float64
}

// rateTracker keeps, per shard of a group, the last observations its
// rates are computed from: the reference design's dashboards show rates
// taken between two reads of the same table.
type rateTracker struct {
	mu   sync.Mutex
	seen map[rateKey]*rateHistory
}

type rateKey struct {
	stream, group string
	shard         int
}

type rateSample struct {
	at     time.Time
	length int64
	lag    *int64
}

// rateHistory holds the newest sample and the one before it, at least
// minRateGap apart, so that two reads in quick succession do not divide
// by a tiny interval.
type rateHistory struct{ older, newest *rateSample }

const (
	minRateGap = time.Second
	// maxRateKeys bounds the tracker: past it every history is dropped
	// (rates restart from the next two reads) rather than grow without
	// bound with groups that come and go.
	maxRateKeys = 100_000
)

func (t *rateTracker) observe(stream, group string, shards []protocol.ShardState, now time.Time) map[int]shardRate {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil || len(t.seen) > maxRateKeys {
		t.seen = map[rateKey]*rateHistory{}
	}
	out := make(map[int]shardRate, len(shards))
	for _, st := range shards {
		k := rateKey{stream, group, st.ShardIndex}
		h := t.seen[k]
		if h == nil {
			h = &rateHistory{}
			t.seen[k] = h
		}
		cur := &rateSample{at: now, length: st.Length, lag: st.Lag}
		base := h.older
		if h.newest == nil || now.Sub(h.newest.at) >= minRateGap {
			base = h.newest
			h.older, h.newest = h.newest, cur
		}
		out[st.ShardIndex] = rateBetween(base, cur)
	}
	return out
}

func rateBetween(base, cur *rateSample) shardRate {
	if base == nil {
		return shardRate{}
	}
	secs := cur.at.Sub(base.at).Seconds()
	if secs <= 0 {
		return shardRate{}
	}
	produced := max(0, float64(cur.length-base.length)/secs)
	r := shardRate{produced: &produced}
	if base.lag != nil && cur.lag != nil {
		consumed := max(0, float64((cur.length-base.length)-(*cur.lag-*base.lag))/secs)
		r.consumed = &consumed
	}
	return r
}
