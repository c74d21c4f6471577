package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// groupProgressSource sums, over the shard keys KEYS, what XINFO GROUPS
// tells of group ARGV[1]: entries read by the group, entries pending, and
// the keys of which the group has read something. One script call is one
// round trip and a few microseconds of Redis time, however many shards.
const groupProgressSource = `
local read, pending, started = 0, 0, 0
for _, key in ipairs(KEYS) do
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name, r, p
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i+1]
      elseif g[i] == 'entries-read' then r = g[i+1]
      elseif g[i] == 'pending' then p = g[i+1] end
    end
    if name == ARGV[1] then
      if type(r) == 'number' then read = read + r end
      if type(r) == 'number' and r > 0 then started = started + 1 end
      pending = pending + p
    end
  end
end
return {read, pending, started}
`

var groupProgress = redis.NewScript(groupProgressSource)

// drainWatch is one phase's view from Redis: when the group had read from
// every shard, and when it had read all entries with none left pending.
// Every subject is timed by it alike, from outside, so that a runtime is
// not trusted to time itself. The window opens once every shard is being
// read: what comes before, a member's join and each new shard's
// recovery reads (its own pending entries, a claim), is the cost of an
// assignment, paid once per grant (the converge bench measures it), not
// of the data plane; the raw loop, which has no such start, gets the same
// rule.
type drainWatch struct {
	rdb     redis.UniversalClient
	keys    []string
	group   string
	records int64
	// cpu reads the CPU time of the consuming process (and redisCPU that
	// of redis-server, when known) at both ends of the window.
	cpu, redisCPU func() (time.Duration, error)
}

// watchResult is a drained phase: its window and the CPU time the
// consuming process and redis-server spent in it.
type watchResult struct {
	Records  int
	Elapsed  time.Duration
	CPU      time.Duration
	RedisCPU time.Duration
}

// watchPoll is how often the watcher asks Redis: small against a phase's
// tenths of a second, and one cheap script call each time.
const watchPoll = time.Millisecond

// run polls until the group has read and acknowledged every record, or
// done reports an error (the subject stopped), or ctx ends.
func (w *drainWatch) run(ctx context.Context, done <-chan error) (watchResult, error) {
	var res watchResult
	var start time.Time
	var cpu0, rcpu0 time.Duration
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-done:
			if err != nil {
				return res, err
			}
			// The subject returned by itself (the raw loop, when its
			// shards were empty): the next polls see what it left.
			done = nil
		case <-tick.C:
		}
		read, pending, started, err := w.progress(ctx)
		if err != nil {
			return res, fmt.Errorf("watch %s: %w", w.group, err)
		}
		now := time.Now()
		if start.IsZero() && started == int64(len(w.keys)) {
			start = now
			cpu0, rcpu0 = readCPU(w.cpu), readCPU(w.redisCPU)
		}
		if !start.IsZero() && read >= w.records && pending == 0 {
			res.Records, res.Elapsed = int(w.records), now.Sub(start)
			res.CPU = readCPU(w.cpu) - cpu0
			res.RedisCPU = readCPU(w.redisCPU) - rcpu0
			return res, nil
		}
	}
}

// progress sums the group's entries read and pending over the keys, and
// counts the keys read from: one script call, or one per key on a
// cluster (keys of several slots).
func (w *drainWatch) progress(ctx context.Context) (read, pending, started int64, err error) {
	if _, cluster := w.rdb.(*redis.ClusterClient); !cluster {
		v, err := groupProgress.Run(ctx, w.rdb, w.keys, w.group).Int64Slice()
		if err != nil || len(v) != 3 {
			return 0, 0, 0, fmt.Errorf("group progress: %v %w", v, err)
		}
		return v[0], v[1], v[2], nil
	}
	pipe := w.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(w.keys))
	for i, k := range w.keys {
		cmds[i] = groupProgress.Eval(ctx, pipe, []string{k}, w.group)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, 0, fmt.Errorf("group progress: %w", err)
	}
	for _, c := range cmds {
		v, err := c.Int64Slice()
		if err != nil || len(v) != 3 {
			return 0, 0, 0, fmt.Errorf("group progress: %v %w", v, err)
		}
		read, pending, started = read+v[0], pending+v[1], started+v[2]
	}
	return read, pending, started, nil
}

// readCPU reads a CPU clock, 0 when there is none or it fails.
func readCPU(f func() (time.Duration, error)) time.Duration {
	if f == nil {
		return 0
	}
	d, err := f()
	if err != nil {
		return 0
	}
	return d
}
