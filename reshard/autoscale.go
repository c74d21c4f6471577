package reshard

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// The autoscaling policy of a stream (docs/protocol.md, autoscaling): facts
// about the load of its live shards in, a shard count out. Like the rest of
// the package it is pure: the stream actor samples Redis beside itself,
// keeps the samples, and acts on the decision through [Scale].

// AutoscaleMode says what the policy does with its decisions.
type AutoscaleMode string

// Autoscale modes.
const (
	// AutoscaleOff decides nothing.
	AutoscaleOff AutoscaleMode = "off"
	// AutoscaleDryRun decides and reports, and scales nothing.
	AutoscaleDryRun AutoscaleMode = "dry-run"
	// AutoscaleOn decides and scales.
	AutoscaleOn AutoscaleMode = "on"
)

// AutoscaleAction is what a decision does.
type AutoscaleAction string

// Autoscale actions.
const (
	ActionScaleOut AutoscaleAction = "scale-out"
	ActionScaleIn  AutoscaleAction = "scale-in"
	ActionNone     AutoscaleAction = "none"
)

// Policy defaults, applied by [AutoscalePolicy.WithDefaults].
const (
	DefaultLowWatermark = 0.5
	DefaultCooldown     = 5 * time.Minute
	// MaxCooldown bounds the cooldown: the samples of one cooldown are
	// kept in memory.
	MaxCooldown = 24 * time.Hour
)

// AutoscalePolicy is a stream's autoscaling policy. A bound of zero is no
// bound; at least one is set unless the mode is off.
type AutoscalePolicy struct {
	Mode AutoscaleMode
	// MaxShardLength bounds each live shard's XLEN: the records not yet
	// acknowledged and deleted by every group.
	MaxShardLength int64
	// MaxShardMemoryBytes bounds each live shard key's MEMORY USAGE.
	MaxShardMemoryBytes int64
	// MaxShardAppendsPerSecond bounds each live shard's appends per
	// second, averaged over the samples of one cooldown.
	MaxShardAppendsPerSecond float64
	// LowWatermark is the fraction of every bound under which every shard
	// must stay for a whole cooldown before the stream scales in.
	LowWatermark float64
	// MinShards and MaxShards bound the shard count the policy scales to.
	MinShards, MaxShards int
	// Cooldown is the least time between the end of one change of the
	// shard count (or a dry run's reported decision) and the next
	// decision, and how long a stream must stay quiet to scale in.
	Cooldown time.Duration
}

// WithDefaults fills what p leaves unset: the low watermark, the cooldown,
// at least one shard, and at most limit (the coordinator's --max-shards).
func (p AutoscalePolicy) WithDefaults(limit int) AutoscalePolicy {
	if p.Mode == "" {
		p.Mode = AutoscaleOff
	}
	if p.LowWatermark == 0 {
		p.LowWatermark = DefaultLowWatermark
	}
	if p.Cooldown == 0 {
		p.Cooldown = DefaultCooldown
	}
	if p.MinShards == 0 {
		p.MinShards = 1
	}
	if p.MaxShards == 0 {
		p.MaxShards = limit
	}
	return p
}

// ValidateAutoscale checks a policy with its defaults applied against
// limit, the most shards the coordinator allows (--max-shards). Errors
// are INVALID_REQUEST and name the field.
func ValidateAutoscale(p AutoscalePolicy, limit int) error {
	var why []string
	switch p.Mode {
	case AutoscaleOff, AutoscaleDryRun, AutoscaleOn:
	default:
		why = append(why, fmt.Sprintf("mode %q is not one of on, dry-run, off", p.Mode))
	}
	if p.MaxShardLength < 0 || p.MaxShardMemoryBytes < 0 || p.MaxShardAppendsPerSecond < 0 ||
		math.IsNaN(p.MaxShardAppendsPerSecond) || math.IsInf(p.MaxShardAppendsPerSecond, 0) {
		why = append(why, "maxShardLength, maxShardMemoryBytes and maxShardAppendsPerSecond must be positive when given")
	}
	if p.Mode != AutoscaleOff && p.MaxShardLength == 0 && p.MaxShardMemoryBytes == 0 && p.MaxShardAppendsPerSecond == 0 {
		why = append(why, "mode "+string(p.Mode)+" needs at least one of maxShardLength, maxShardMemoryBytes, maxShardAppendsPerSecond")
	}
	if !(p.LowWatermark > 0 && p.LowWatermark < 1) {
		why = append(why, fmt.Sprintf("lowWatermark %v must be a fraction of the bounds between 0 and 1, both excluded", p.LowWatermark))
	}
	if p.MinShards < 1 || p.MinShards > p.MaxShards {
		why = append(why, fmt.Sprintf("minShards %d must be at least 1 and at most maxShards %d", p.MinShards, p.MaxShards))
	}
	if p.MaxShards > limit {
		why = append(why, fmt.Sprintf("maxShards %d is above this coordinator's --max-shards %d", p.MaxShards, limit))
	}
	if p.Cooldown < time.Second || p.Cooldown > MaxCooldown {
		why = append(why, fmt.Sprintf("cooldownSeconds %v must be between 1 and %d", p.Cooldown.Seconds(), int(MaxCooldown.Seconds())))
	}
	if len(why) > 0 {
		return protocol.Errorf(protocol.CodeInvalidRequest, "autoscale policy: "+strings.Join(why, "; "))
	}
	return nil
}

// LoadSample is one reading of a stream's live shards in Redis.
type LoadSample struct {
	At time.Time
	// ShardCount is the stream's shard count when it was read.
	ShardCount int
	// Shards are the live shards 0..ShardCount-1, in order.
	Shards []ShardLoad
	// Err is set when Redis could not be read: the sample tells nothing.
	Err error
}

// ShardLoad is one live shard as a sample read it.
type ShardLoad struct {
	Length int64
	// MemoryBytes is the key's MEMORY USAGE; -1 when not read.
	MemoryBytes int64
	// Added is how many entries the key has had added in its life (XINFO
	// STREAM entries-added); -1 when Redis does not tell (before 7.0).
	Added int64
}

// AutoscaleFacts is what a decision is made on.
type AutoscaleFacts struct {
	Now    time.Time
	Stream Stream
	// LastReported is when a dry run last reported a decision that was
	// not none: it starts a cooldown as a taken one would.
	LastReported time.Time
	// Samples are the readings of the last cooldown or so, oldest first.
	Samples []LoadSample
	// Limit is the most shards the coordinator allows (--max-shards).
	Limit int
}

// AutoscaleDecision is what the policy decided: scale from one count to
// another, or nothing, and why.
type AutoscaleDecision struct {
	Action   AutoscaleAction
	From, To int
	Reason   string
}

// Autoscale decides whether the stream scales, and to how many shards.
//
// Nothing is decided while the mode is off, a migration is active, within
// the cooldown after the last change (the end of the last migration, or
// the last reported dry-run decision), or when the latest sample could
// not be read or is of another shard count.
//
// Scale out: when a live shard passes a bound, to the fewest shards that
// would bring the fullest one to the middle of the band between the low
// watermark and the bound if the load spread over them, at least one
// more, at most maxShards and the limit. Scale in: when every sample of a
// whole cooldown has every shard under the low watermark of every bound,
// to the fewest shards (at least minShards) that keep the peak of that
// cooldown under the middle of the band. Both aim at the same point, so a
// steady load that made the stream scale out never makes it scale back
// in, and the other way round: it does not flap.
func Autoscale(p AutoscalePolicy, f AutoscaleFacts) AutoscaleDecision {
	n := f.Stream.ShardCount
	d := AutoscaleDecision{Action: ActionNone, From: n, To: n}
	none := func(format string, args ...any) AutoscaleDecision {
		d.Reason = fmt.Sprintf(format, args...)
		return d
	}
	if p.Mode == AutoscaleOff || p.Mode == "" {
		return none("autoscale is off")
	}
	if m := f.Stream.Active(); m != nil {
		return none("migration %s is %s", m.ReshardingID, m.State)
	}
	if last := lastChange(f); !last.IsZero() {
		if left := last.Add(p.Cooldown).Sub(f.Now); left > 0 {
			return none("cooldown: %v left", left.Round(time.Millisecond))
		}
	}
	if n == 0 {
		return none("the stream has no shards")
	}
	if len(f.Samples) == 0 {
		return none("no load sample yet")
	}
	latest := f.Samples[len(f.Samples)-1]
	if latest.Err != nil {
		return none("load not read: %v", latest.Err)
	}
	if latest.ShardCount != n || len(latest.Shards) != n {
		return none("the latest sample is of %d shards, the stream has %d", latest.ShardCount, n)
	}
	ceiling := min(p.MaxShards, f.Limit)
	if ceiling < 1 {
		ceiling = f.Limit
	}
	aim := (1 + p.LowWatermark) / 2
	window := usable(f.Samples, n)
	rates := appendRates(window)
	now, missing := p.loads(latest, rates)
	if missing != "" {
		return none("load not read: %s", missing)
	}
	peak := now.top()
	switch {
	case n < p.MinShards:
		return scaleTo(d, min(p.MinShards, ceiling), fmt.Sprintf("%d shards are fewer than minShards %d", n, p.MinShards))
	case n > ceiling:
		return scaleTo(d, ceiling, fmt.Sprintf("%d shards are more than maxShards %d", n, ceiling))
	case peak.ratio > 1:
		if n >= ceiling {
			return none("%s, but the stream has maxShards %d already", peak, ceiling)
		}
		to := max(n+1, int(math.Ceil(peak.ratio*float64(n)/aim)))
		return scaleTo(d, min(to, ceiling), peak.String())
	}
	// Scale in only on a whole cooldown of samples, each under the low
	// watermark of every bound.
	quiet, span := peak, time.Duration(0)
	if len(window) > 0 {
		span = latest.At.Sub(window[0].At)
	}
	if span < p.Cooldown || (p.MaxShardAppendsPerSecond > 0 && rates == nil) {
		return none("within bounds (%s); not quiet for a whole cooldown yet", peak.brief())
	}
	for _, s := range window {
		l, _ := p.loads(s, rates)
		if t := l.top(); t.ratio > quiet.ratio {
			quiet = t
		}
	}
	if quiet.ratio >= p.LowWatermark {
		return none("within bounds (%s); above the low watermark %v in the last cooldown", quiet.brief(), p.LowWatermark)
	}
	to := max(p.MinShards, int(math.Ceil(quiet.ratio*float64(n)/aim)), 1)
	if to >= n {
		return none("quiet (%s), and %d shards are the fewest that keep it so", quiet.brief(), n)
	}
	return scaleTo(d, to, fmt.Sprintf("every shard stayed under %v of its bounds for %v (peak %s)", p.LowWatermark, p.Cooldown, quiet.brief()))
}

func scaleTo(d AutoscaleDecision, to int, reason string) AutoscaleDecision {
	d.To, d.Reason = to, reason
	switch {
	case to > d.From:
		d.Action = ActionScaleOut
	case to < d.From:
		d.Action = ActionScaleIn
	}
	return d
}

// lastChange is the latest of the end of the last migration and the last
// reported dry-run decision.
func lastChange(f AutoscaleFacts) time.Time {
	last := f.LastReported
	for _, m := range f.Stream.Migrations {
		if m.UpdatedAt.After(last) {
			last = m.UpdatedAt
		}
	}
	return last
}

// usable are the latest samples read at shard count n without an error,
// back to the first one that was not: a failed read or another count
// starts the quiet time again.
func usable(samples []LoadSample, n int) []LoadSample {
	i := len(samples)
	for i > 0 && samples[i-1].Err == nil && samples[i-1].ShardCount == n && len(samples[i-1].Shards) == n {
		i--
	}
	return samples[i:]
}

// appendRates is each shard's appends per second between the first and
// the last of window, or nil when that cannot be told (fewer than two
// samples, less than a second apart, or a Redis that does not count).
func appendRates(window []LoadSample) []float64 {
	if len(window) < 2 {
		return nil
	}
	first, last := window[0], window[len(window)-1]
	secs := last.At.Sub(first.At).Seconds()
	if secs < 1 {
		return nil
	}
	rates := make([]float64, len(last.Shards))
	for i := range last.Shards {
		a, b := first.Shards[i].Added, last.Shards[i].Added
		if a < 0 || b < 0 {
			return nil
		}
		rates[i] = float64(max(b-a, 0)) / secs
	}
	return rates
}

// load is one shard's value of one bound.
type load struct {
	shard  int
	what   string
	value  float64
	bound  float64
	ratio  float64
	isRate bool
}

func (l load) String() string {
	if l.what == "" {
		return "no bound"
	}
	if l.isRate {
		return fmt.Sprintf("shard %d %s %.1f/s is over %.1f", l.shard, l.what, l.value, l.bound)
	}
	return fmt.Sprintf("shard %d %s %d is over %d", l.shard, l.what, int64(l.value), int64(l.bound))
}

// brief names the fullest shard and how full it is.
func (l load) brief() string {
	if l.what == "" {
		return "no bound"
	}
	return fmt.Sprintf("shard %d at %.0f%% of %s", l.shard, 100*l.ratio, l.what)
}

type loads []load

// top is the load with the highest ratio (the first of equals).
func (ls loads) top() load {
	var t load
	for i, l := range ls {
		if i == 0 || l.ratio > t.ratio {
			t = l
		}
	}
	return t
}

// loads are the shards' values of every bound p sets in sample s, or what
// could not be read. rates are the shards' append rates, nil when unknown:
// an unknown rate is no load (the other bounds still decide).
func (p AutoscalePolicy) loads(s LoadSample, rates []float64) (loads, string) {
	var out loads
	for i, sh := range s.Shards {
		if b := p.MaxShardLength; b > 0 {
			out = append(out, load{shard: i, what: "length", value: float64(sh.Length), bound: float64(b), ratio: float64(sh.Length) / float64(b)})
		}
		if b := p.MaxShardMemoryBytes; b > 0 {
			if sh.MemoryBytes < 0 {
				return nil, fmt.Sprintf("memory of shard %d", i)
			}
			out = append(out, load{shard: i, what: "memory", value: float64(sh.MemoryBytes), bound: float64(b), ratio: float64(sh.MemoryBytes) / float64(b)})
		}
		if b := p.MaxShardAppendsPerSecond; b > 0 && rates != nil {
			out = append(out, load{shard: i, what: "appends", value: rates[i], bound: b, ratio: rates[i] / b, isRate: true})
		}
	}
	return out, ""
}
