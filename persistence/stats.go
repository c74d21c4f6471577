package persistence

import "sync/atomic"

// WriteStats counts what a store wrote to its engine since it was opened:
// every commit, with the keys (puts and deletes) and bytes (keys plus
// values) it carried. Benchmarks and tests use it to check that a step
// writes what it changed and nothing more.
type WriteStats struct {
	// Commits is the number of engine commits (atomic batches).
	Commits uint64
	// Keys is the number of keys written or deleted.
	Keys uint64
	// Bytes is the sum of key and value sizes written.
	Bytes uint64
	// MaxCommitBytes is the size of the largest commit.
	MaxCommitBytes uint64
	// MaxValueBytes is the size of the largest value written.
	MaxValueBytes uint64
}

// Sub returns the writes of s since an earlier reading before (the maxima
// are those of s).
func (s WriteStats) Sub(before WriteStats) WriteStats {
	return WriteStats{
		Commits: s.Commits - before.Commits, Keys: s.Keys - before.Keys, Bytes: s.Bytes - before.Bytes,
		MaxCommitBytes: s.MaxCommitBytes, MaxValueBytes: s.MaxValueBytes,
	}
}

// writeStats is the store's running count; safe for concurrent use.
type writeStats struct {
	commits, keys, bytes atomic.Uint64
	maxCommit, maxValue  atomic.Uint64
}

func (w *writeStats) count(ops []op) {
	var total, largest uint64
	for _, o := range ops {
		total += uint64(o.size())
		largest = max(largest, uint64(len(o.value)))
	}
	w.commits.Add(1)
	w.keys.Add(uint64(len(ops)))
	w.bytes.Add(total)
	raise(&w.maxCommit, total)
	raise(&w.maxValue, largest)
}

func raise(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// WriteStats returns what the store wrote since it was opened.
func (c *core) WriteStats() WriteStats {
	return WriteStats{
		Commits: c.stats.commits.Load(), Keys: c.stats.keys.Load(), Bytes: c.stats.bytes.Load(),
		MaxCommitBytes: c.stats.maxCommit.Load(), MaxValueBytes: c.stats.maxValue.Load(),
	}
}
