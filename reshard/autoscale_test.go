package reshard

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/rscoord/rscoord/client/protocol"
)

// Scripted autoscale decisions: each file under testdata/autoscale drives
// one stream on a fake clock. Regenerate after an intended change with
//
//	go test ./reshard -run TestAutoscaleScripts -rewrite
//
// Commands:
//
//	policy mode=M [length=N] [memory=N] [rate=R] [low=F] [min=N] [max=N] [cooldown=D]
//	                           set the policy (defaults filled) and print its validation
//	stream shards=N [limit=N]  a stream of N shards; limit is --max-shards (default 100)
//	sample len=a,b,… [mem=a,b,…] [added=a,b,…]   a reading of the live shards now
//	sample err                 a reading Redis did not answer
//	advance D                  the clock moves
//	decide                     the decision now; a dry run's reported decision starts its cooldown
//	migrate N                  an operator's scale to N is ACTIVE
//	finish                     the active migration is DEPRECATED now
func TestAutoscaleScripts(t *testing.T) {
	t.Parallel()
	datadriven.Walk(t, "testdata/autoscale", func(t *testing.T, path string) {
		s := &autoscaleScript{now: t0, limit: 100}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return strings.TrimSpace(s.do(d)) + "\n"
		})
	})
}

type autoscaleScript struct {
	now      time.Time
	limit    int
	policy   AutoscalePolicy
	stream   Stream
	samples  []LoadSample
	reported time.Time
}

func (sc *autoscaleScript) do(d *datadriven.TestData) string {
	opts := map[string]string{}
	for _, a := range d.CmdArgs {
		opts[a.Key] = strings.Join(a.Vals, ",")
	}
	num := func(k string) int64 {
		v, _ := strconv.ParseInt(opts[k], 10, 64)
		return v
	}
	list := func(k string, def int64) []int64 {
		out := make([]int64, sc.stream.ShardCount)
		for i := range out {
			out[i] = def
		}
		if v, ok := opts[k]; ok {
			for i, f := range strings.Split(v, ",") {
				if i < len(out) {
					out[i], _ = strconv.ParseInt(f, 10, 64)
				}
			}
		}
		return out
	}
	switch d.Cmd {
	case "policy":
		rate, _ := strconv.ParseFloat(opts["rate"], 64)
		low, _ := strconv.ParseFloat(opts["low"], 64)
		var cooldown time.Duration
		if v, ok := opts["cooldown"]; ok {
			cooldown, _ = time.ParseDuration(v)
		}
		sc.policy = AutoscalePolicy{Mode: AutoscaleMode(opts["mode"]), MaxShardLength: num("length"), MaxShardMemoryBytes: num("memory"),
			MaxShardAppendsPerSecond: rate, LowWatermark: low, MinShards: int(num("min")), MaxShards: int(num("max")), Cooldown: cooldown}.WithDefaults(sc.limit)
		p := sc.policy
		line := fmt.Sprintf("policy %s length=%d memory=%d rate=%v low=%v min=%d max=%d cooldown=%v", p.Mode, p.MaxShardLength,
			p.MaxShardMemoryBytes, p.MaxShardAppendsPerSecond, p.LowWatermark, p.MinShards, p.MaxShards, p.Cooldown)
		if err := ValidateAutoscale(p, sc.limit); err != nil {
			var perr *protocol.Error
			if errors.As(err, &perr) {
				line += "\nrefused " + string(perr.Code) + ": " + perr.Message
			}
		}
		return line
	case "stream":
		if _, ok := opts["limit"]; ok {
			sc.limit = int(num("limit"))
		}
		sc.stream = Stream{Prefix: "orders", ShardCount: int(num("shards")), Draining: []int{}, MetadataVersion: 1}
		sc.samples, sc.reported = nil, time.Time{}
		return fmt.Sprintf("stream shards=%d limit=%d", sc.stream.ShardCount, sc.limit)
	case "sample":
		s := LoadSample{At: sc.now, ShardCount: sc.stream.ShardCount}
		if _, ok := opts["err"]; ok {
			s.Err = errors.New("redis: i/o timeout")
		} else {
			lens, mems, added := list("len", 0), list("mem", -1), list("added", -1)
			for i := range lens {
				s.Shards = append(s.Shards, ShardLoad{Length: lens[i], MemoryBytes: mems[i], Added: added[i]})
			}
		}
		sc.samples = append(sc.samples, s)
		return fmt.Sprintf("sample at +%v of %d shards", sc.now.Sub(t0), s.ShardCount)
	case "advance":
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			return err.Error()
		}
		sc.now = sc.now.Add(dur)
		return "now +" + sc.now.Sub(t0).String()
	case "decide":
		dec := Autoscale(sc.policy, AutoscaleFacts{Now: sc.now, Stream: sc.stream, LastReported: sc.reported, Samples: sc.samples, Limit: sc.limit})
		if dec.Action != ActionNone && sc.policy.Mode == AutoscaleDryRun {
			sc.reported = sc.now
		}
		if dec.Action == ActionNone {
			return "none: " + dec.Reason
		}
		return fmt.Sprintf("%s %d→%d: %s", dec.Action, dec.From, dec.To, dec.Reason)
	case "migrate":
		to, _ := strconv.Atoi(d.CmdArgs[0].Key)
		sc.stream.Migrations = append(sc.stream.Migrations, Migration{Migration: protocol.Migration{
			ReshardingID: fmt.Sprintf("rs-%d", len(sc.stream.Migrations)+1), FromShardCount: sc.stream.ShardCount, ToShardCount: to,
			State: protocol.MigrationActive, CreatedAt: sc.now, UpdatedAt: sc.now}})
		sc.stream.ShardCount = to
		return fmt.Sprintf("rs-%d ACTIVE, %d shards", len(sc.stream.Migrations), to)
	case "finish":
		m := sc.stream.Active()
		if m == nil {
			return "nothing active"
		}
		m.State, m.UpdatedAt = protocol.MigrationDeprecated, sc.now
		return m.ReshardingID + " DEPRECATED"
	}
	return "unknown command " + d.Cmd
}
