package bench

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// ConsumerConfig sizes a consumer comparison.
type ConsumerConfig struct {
	Coordinator string
	// Credentials authenticate every call; the zero value sends none.
	Credentials coordclient.Credentials
	Redis       redis.UniversalClient
	// Shards per stream; each phase reads a fresh stream.
	Shards int
	// Records per phase, spread evenly over the shards.
	Records int
	// Workers is the member's runtimeMaxConcurrency, the raw loop's
	// goroutine count and the service's workers.
	Workers int
	// Batch is the XREADGROUP COUNT of the raw loop and of the bench's
	// members (the service keeps the runtime's default, as users do).
	Batch int
	// Rounds are measured after one warm-up round, which is discarded;
	// each runs every subject four times beside four runs of the raw
	// loop.
	Rounds int
	// RedisCPU, if set, reads redis-server's CPU time (ProcessCPU), so
	// that the report tells Redis's cost per record too.
	RedisCPU func() (time.Duration, error)
}

// The consumer subjects, each compared with the raw loop.
var consumerSubjects = []struct {
	name, title string
	target      float64
	start       startFunc
}{
	{"member", "member Handler+msg.Ack vs raw XREADGROUP+batch XACK", 0.8, startMember},
	{"batch", "member BatchHandler+AckAll vs raw XREADGROUP+batch XACK", 0.95, startMemberBatch},
	{"service", "tally service (Handler+msg.Ack, runtime defaults) vs raw XREADGROUP+batch XACK", 0.8, startService},
}

// phasePattern is the order of one subject's phases in a round (true: the
// raw loop): ABBA BAAB, four of each, whose mean positions are equal, so
// that a load that rises or falls steadily over the round weighs on both
// alike.
var phasePattern = []bool{true, false, false, true, false, true, true, false}

// startFunc starts a subject consuming stream prefix in the background.
// done yields its error if it stops by itself (nil: it stopped because it
// found nothing more, as the raw loop does); stop ends it and waits.
type startFunc func(ctx context.Context, cfg ConsumerConfig, prefix string) (done <-chan error, stop func() error, err error)

// RunConsumer compares consumers on one Redis, each draining a pre-filled
// stream of the same records, with a hand-written baseline: Workers
// goroutines each reading its share of the shards with XREADGROUP and
// acknowledging each read with one XACK of all its ids. The subjects are
// one member (Workers workers) whose Handler calls msg.Ack per record
// (acks coalesced by the runtime), one whose BatchHandler calls AckAll, and
// the tally example service, built as the documentation tells users.
//
// Every phase is timed alike, from Redis (drainWatch): from the group's
// first read to the point where it has read every record and none is
// pending, so the join before and the leave after are not counted. A
// round fills every stream it needs first, then runs, for each subject
// in turn (the order rotates from round to round), four phases of the
// raw loop and four of the subject, interleaved (phasePattern) and back
// to back. A subject's ratio in a round is the raw loop's fastest of
// those phases over its own fastest: other work on a shared machine only
// ever adds time to a phase, and the fastest of four is the one it left
// alone, or nearly. The first round warms up
// (connections, code paths, the heap) and is not counted. The figure to
// quote is the median of the rounds' ratios: on a machine shared with
// other work single phases swing, the median much less. CPU per record
// is reported too: it depends on what a consumer does, not on how much
// of the machine it got.
func RunConsumer(ctx context.Context, cfg ConsumerConfig) ([]Comparison, error) {
	hc, err := newClient(cfg.Coordinator, cfg.Credentials, 4)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	n := len(consumerSubjects)
	out := make([]Comparison, n)
	for i, s := range consumerSubjects {
		out[i] = Comparison{Name: s.title, Target: s.target}
	}
	var base phaseTotals
	subj := make([]phaseTotals, n)
	for round := range cfg.Rounds + 1 {
		// Every stream of the round is filled first, so that its phases
		// run back to back: a subject's phases and the raw ones beside
		// them are as close in time as they can be.
		type phase struct {
			subject int  // the subject the phase is measured for
			raw     bool // the raw loop's phase beside it
			prefix  string
		}
		var phases []phase
		for i := range n {
			slot := (i + round) % n
			for j, raw := range phasePattern {
				name := consumerSubjects[slot].name
				if raw {
					name += "-raw"
				}
				phases = append(phases, phase{slot, raw, fmt.Sprintf("bench-%s-%d-%d", name, round, j)})
			}
		}
		for _, ph := range phases {
			if err := fill(ctx, hc, cfg, ph.prefix); err != nil {
				return nil, err
			}
		}
		// Each subject's own phases and the raw ones beside them.
		roundBase := make([][]watchResult, n)
		roundSubj := make([][]watchResult, n)
		for _, ph := range phases {
			start, name := consumerSubjects[ph.subject].start, consumerSubjects[ph.subject].name
			if ph.raw {
				start, name = startRaw, "raw"
			}
			res, err := drainPhase(ctx, cfg, ph.prefix, start)
			if err != nil {
				return nil, fmt.Errorf("%s phase of round %d: %w", name, round, err)
			}
			if ph.raw {
				roundBase[ph.subject] = append(roundBase[ph.subject], res)
			} else {
				roundSubj[ph.subject] = append(roundSubj[ph.subject], res)
			}
		}
		if round == 0 {
			continue // warm-up
		}
		for i := range n {
			for _, r := range roundBase[i] {
				base.add(r)
			}
			for _, r := range roundSubj[i] {
				subj[i].add(r)
			}
			out[i].RoundRatios = append(out[i].RoundRatios, fastest(roundBase[i]).Seconds()/fastest(roundSubj[i]).Seconds())
		}
	}
	for i := range out {
		c := &out[i]
		c.Baseline, c.Subject = base.rate, subj[i].rate
		if c.Baseline.PerSecond > 0 {
			c.Ratio = c.Subject.PerSecond / c.Baseline.PerSecond
		}
		c.MedianRatio = median(c.RoundRatios)
		if len(c.RoundRatios) > 0 {
			c.MinRatio, c.MaxRatio = slices.Min(c.RoundRatios), slices.Max(c.RoundRatios)
		}
		c.BaselineCPU, c.SubjectCPU = base.perRecord(), subj[i].perRecord()
		c.BestRatio = base.best.Seconds() / subj[i].best.Seconds()
	}
	return out, nil
}

// phaseTotals adds up a subject's measured phases.
type phaseTotals struct {
	records  int
	rate     Rate
	cpu      time.Duration
	redisCPU time.Duration
	// best is the fastest phase.
	best time.Duration
}

func (t *phaseTotals) add(r watchResult) {
	t.rate.add(r.Records, r.Elapsed)
	t.cpu += r.CPU
	t.redisCPU += r.RedisCPU
	if t.best == 0 || r.Elapsed < t.best {
		t.best = r.Elapsed
	}
}

// fastest is the shortest of the phases' times: on a shared machine other
// work only ever adds time to a phase, so of two runs of the same work
// the faster is the better estimate of what it costs.
func fastest(rs []watchResult) time.Duration {
	var best time.Duration
	for _, r := range rs {
		if best == 0 || r.Elapsed < best {
			best = r.Elapsed
		}
	}
	return best
}

func (t *phaseTotals) perRecord() CPUCost {
	if t.rate.Records == 0 {
		return CPUCost{}
	}
	n := time.Duration(t.rate.Records)
	return CPUCost{Process: t.cpu / n, Redis: t.redisCPU / n}
}

// drainPhase lets start's subject drain a filled stream while drainWatch
// times it, stops the subject and deletes the stream's keys.
func drainPhase(ctx context.Context, cfg ConsumerConfig, prefix string, start startFunc) (watchResult, error) {
	keys := make([]string, cfg.Shards)
	for i := range keys {
		keys[i] = protocol.StreamKey(prefix, i)
	}
	defer deleteKeys(context.WithoutCancel(ctx), cfg.Redis, keys)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	w := &drainWatch{rdb: cfg.Redis, keys: keys, group: prefix, records: int64(cfg.Records), cpu: selfCPU, redisCPU: cfg.RedisCPU}
	// A CPU profile of the run (rscoord-bench --cpuprofile) tells the
	// subjects apart by this label (go tool pprof -tagfocus phase=…).
	var done <-chan error
	var stop func() error
	var err error
	pprof.Do(pctx, pprof.Labels("phase", strings.TrimPrefix(prefix, "bench-")), func(lctx context.Context) {
		done, stop, err = start(lctx, cfg, prefix)
	})
	if err != nil {
		return watchResult{}, err
	}
	res, err := w.run(pctx, done)
	if serr := stop(); err == nil && serr != nil {
		err = serr
	}
	return res, err
}

// deleteKeys frees the phase's records in Redis (one phase's stream is
// not read again); a failure only leaves memory in use.
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, keys []string) {
	pipe := rdb.Pipeline()
	for _, k := range keys {
		pipe.Del(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
}

// fill creates the stream on the coordinator, its shard keys and consumer
// group in Redis, and writes the records, each with an integer field "n".
func fill(ctx context.Context, hc *coordclient.Client, cfg ConsumerConfig, prefix string) error {
	if err := CreateStream(ctx, hc, prefix, cfg.Shards); err != nil {
		return err
	}
	payload := strings.Repeat("x", 64)
	pipe := cfg.Redis.Pipeline()
	for i := range cfg.Shards {
		pipe.XGroupCreateMkStream(ctx, protocol.StreamKey(prefix, i), prefix, "0")
	}
	for i := range cfg.Records {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: protocol.StreamKey(prefix, i%cfg.Shards), Values: []any{"n", i, "payload", payload}})
		if pipe.Len() >= 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("fill %s: %w", prefix, err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("fill %s: %w", prefix, err)
	}
	return nil
}
