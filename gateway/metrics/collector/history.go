package collector

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Bounds of a [History].
const (
	// DefaultHistoryWindow is how far back a history reaches by default.
	DefaultHistoryWindow = 15 * time.Minute
	// MaxHistorySamples bounds the samples one series keeps, whatever the
	// window and interval: 15 min at a one-second interval.
	MaxHistorySamples = 900
	// HistorySampleBudget bounds the samples a history keeps in all, a
	// sample taking 40 bytes: about 10 MiB. The series it tracks are at
	// most this divided by the samples of one series (4,369 at the
	// default 15 s interval, 291 at one second); a group or shard beyond
	// that has no history until others are forgotten.
	HistorySampleBudget = 1 << 18
)

// History keeps the last samples of every group's shards and of the
// group's totals, as the collection rounds read them, for the console's
// charts. Its memory is bounded by [HistorySampleBudget]. It is safe for
// concurrent use: rounds record while the gateway reads.
type History struct {
	interval  time.Duration
	size      int // samples per series
	maxSeries int

	mu     sync.Mutex
	groups map[groupKey]*groupHistory
	series int // series held: each group's own and its shards'
}

type groupKey struct{ prefix, group string }

type groupHistory struct {
	total  ring
	shards map[int]*ring
	// partial is true when the bound on series left a shard out.
	partial bool
}

// sample is one round's figures of a series; an unknown lag is -1, an
// unknown rate NaN.
type sample struct {
	at                    int64 // Unix milliseconds
	length, pending, lag  int64
	appendsPerS, acksPerS float32
}

// ring holds the last len(buf) samples of a series, next being where the
// next goes once it is full.
type ring struct {
	buf  []sample
	next int
	size int
}

func (r *ring) add(s sample) {
	if len(r.buf) < r.size {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % r.size
}

// last is the newest sample, if any.
func (r *ring) last() (sample, bool) {
	if len(r.buf) == 0 {
		return sample{}, false
	}
	if len(r.buf) < r.size {
		return r.buf[len(r.buf)-1], true
	}
	return r.buf[(r.next+r.size-1)%r.size], true
}

// ordered is the samples, oldest first.
func (r *ring) ordered() []sample {
	if len(r.buf) < r.size {
		return slices.Clone(r.buf)
	}
	return append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
}

// NewHistory keeps window (DefaultHistoryWindow when 0) of samples taken
// every interval, at most [MaxHistorySamples] per series.
func NewHistory(interval, window time.Duration) *History {
	if window <= 0 {
		window = DefaultHistoryWindow
	}
	interval = max(interval, time.Millisecond)
	size := int(min(max((window+interval-1)/interval, 2), MaxHistorySamples))
	return &History{interval: interval, size: size, maxSeries: HistorySampleBudget / size, groups: map[groupKey]*groupHistory{}}
}

// MaxSeries is how many series (groups and shards together) h tracks at
// most.
func (h *History) MaxSeries() int { return h.maxSeries }

// Record adds what a round read of one group at time at.
func (h *History) Record(at time.Time, sh protocol.ShardsResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := groupKey{sh.StreamPrefix, sh.ConsumerGroup}
	g := h.groups[k]
	if g == nil {
		if h.series >= h.maxSeries {
			return
		}
		g = &groupHistory{total: ring{size: h.size}, shards: map[int]*ring{}}
		h.groups[k] = g
		h.series++
	}
	g.partial = false
	ms := at.UnixMilli()
	total := sample{at: ms}
	var totalAppends, totalAcks float64
	lagKnown := true
	for _, s := range sh.Shards {
		r := g.shards[s.ShardIndex]
		if r == nil {
			if h.series >= h.maxSeries {
				g.partial = true
				continue
			}
			r = &ring{size: h.size}
			g.shards[s.ShardIndex] = r
			h.series++
		}
		cur := shardSample(ms, s)
		prev, ok := r.last()
		if ok {
			cur.appendsPerS, cur.acksPerS = h.rates(prev, cur)
		} else {
			cur.appendsPerS, cur.acksPerS = float32(math.NaN()), float32(math.NaN())
		}
		r.add(cur)
		total.length += cur.length
		total.pending += cur.pending
		if cur.lag < 0 {
			lagKnown = false
		}
		total.lag += cur.lag
		totalAppends += float64(cur.appendsPerS)
		totalAcks += float64(cur.acksPerS)
	}
	// A shard that is gone from the layout (retired) is forgotten.
	if len(g.shards) > len(sh.Shards) || g.partial {
		read := make(map[int]bool, len(sh.Shards))
		for _, s := range sh.Shards {
			read[s.ShardIndex] = true
		}
		for i := range g.shards {
			if !read[i] {
				delete(g.shards, i)
				h.series--
			}
		}
	}
	if !lagKnown {
		total.lag = -1
	}
	// A total with one shard's rate unknown is unknown: NaN sums to NaN.
	total.appendsPerS, total.acksPerS = float32(totalAppends), float32(totalAcks)
	if g.partial {
		total.appendsPerS, total.acksPerS = float32(math.NaN()), float32(math.NaN())
	}
	g.total.add(total)
}

// Retain forgets every group not in keep (deleted groups), so that their
// series free room for others.
func (h *History) Retain(keep []protocol.GroupResponse) {
	live := make(map[groupKey]bool, len(keep))
	for _, g := range keep {
		live[groupKey{g.StreamPrefix, g.ConsumerGroup}] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, g := range h.groups {
		if !live[k] {
			h.series -= 1 + len(g.shards)
			delete(h.groups, k)
		}
	}
}

func shardSample(ms int64, s protocol.ShardState) sample {
	// A missing key holds nothing to deliver or acknowledge.
	out := sample{at: ms, length: s.Length, pending: s.Pending, lag: 0}
	if s.Exists {
		out.lag = -1
		if s.Lag != nil {
			out.lag = *s.Lag
		}
	}
	return out
}

// rates derives the appends and acknowledgements per second between two
// samples of one shard. The appends are the rise of the length, unknown
// when it fell (a trim or deletion hides how many were added); entries
// delivered are the appends less the rise of the lag, and acknowledged
// the delivered less the rise of the pending count. A gap of more than
// three intervals (rounds that could not read the shard) makes both
// unknown: an average over it would flatten what happened.
func (h *History) rates(prev, cur sample) (appends, acks float32) {
	nan := float32(math.NaN())
	dt := float64(cur.at-prev.at) / 1000
	if dt <= 0 || time.Duration(cur.at-prev.at)*time.Millisecond > 3*h.interval {
		return nan, nan
	}
	added := cur.length - prev.length
	if added < 0 {
		return nan, nan
	}
	appends, acks = float32(float64(added)/dt), nan
	if cur.lag >= 0 && prev.lag >= 0 {
		acked := added - (cur.lag - prev.lag) - (cur.pending - prev.pending)
		if acked >= 0 {
			acks = float32(float64(acked) / dt)
		}
	}
	return appends, acks
}

// Group answers the samples h keeps of one group; none (and Tracked
// true) for a group no round has read yet.
func (h *History) Group(prefix, group string) protocol.HistoryResponse {
	out := protocol.HistoryResponse{StreamPrefix: prefix, ConsumerGroup: group,
		IntervalMs: h.interval.Milliseconds(), WindowMs: (time.Duration(h.size) * h.interval).Milliseconds(),
		Tracked: true, Group: []protocol.HistorySample{}, Shards: []protocol.ShardHistory{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[groupKey{prefix, group}]
	if g == nil {
		// Not yet read, or left out by the bound: which one, the count of
		// series tells.
		out.Tracked = h.series < h.maxSeries
		return out
	}
	out.Tracked = !g.partial
	out.Group = wire(g.total.ordered())
	for i, r := range g.shards {
		out.Shards = append(out.Shards, protocol.ShardHistory{ShardIndex: i, Samples: wire(r.ordered())})
	}
	slices.SortFunc(out.Shards, func(a, b protocol.ShardHistory) int { return a.ShardIndex - b.ShardIndex })
	return out
}

func wire(in []sample) []protocol.HistorySample {
	out := make([]protocol.HistorySample, len(in))
	for i, s := range in {
		out[i] = protocol.HistorySample{At: time.UnixMilli(s.at).UTC(), Length: s.length,
			Pending: s.pending, Lag: known(s.lag), AppendsPerSecond: rate(s.appendsPerS), AcksPerSecond: rate(s.acksPerS)}
	}
	return out
}

func known(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

func rate(v float32) *float64 {
	if math.IsNaN(float64(v)) {
		return nil
	}
	// float32 keeps about seven digits; three decimals are all a chart
	// needs and read cleanly.
	f := math.Round(float64(v)*1000) / 1000
	return &f
}
