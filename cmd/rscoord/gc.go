package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/metrics"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// serveGCPercent is the collector's target of rscoord serve when GOGC is
// not set. A coordinator's live heap is small (about 8 MB at a thousand
// members), so at Go's default of 100 the collector ran four times a
// second under steady heartbeats, about a tenth of the server's CPU. At
// 400 it runs a quarter as often, and the soft memory limit below keeps
// the larger heap from passing the container's limit.
const serveGCPercent = 400

// serveMemoryRatio is the share of the container's memory limit (or, with
// none, of the machine's memory) that serve sets as Go's soft memory
// limit when GOMEMLIMIT is not set. Near it the collector runs more often
// instead of letting the heap grow.
const serveMemoryRatio = 0.9

// tuneGC applies serve's garbage-collection defaults: the target where
// GOGC is not set, and the soft memory limit where GOMEMLIMIT is not set
// (AUTOMEMLIMIT may change the ratio or turn it off). The environment
// always wins, so an operator keeps Go's own knobs; an empty variable
// counts as unset, as Go's runtime counts it.
func tuneGC(logger *slog.Logger, lookup func(string) (string, bool)) {
	if v, _ := lookup("GOGC"); v == "" {
		debug.SetGCPercent(serveGCPercent)
	}
	_, err := memlimit.Set(memlimit.WithRatio(serveMemoryRatio),
		memlimit.WithProvider(memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)))
	if err != nil && !errors.Is(err, memlimit.ErrNoLimit) {
		// Without a limit the process runs as Go would by default: the
		// collector's target alone bounds the heap.
		logger.Warn("garbage collection: no soft memory limit set", "err", err)
	}
	gogc, limit := gcSettings()
	logger.Info("garbage collection", "gogc", gogc, "memoryLimit", memoryLimitText(limit))
}

// gcSettings reads the collector's target and soft memory limit in force.
func gcSettings() (gogc, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func memoryLimitText(limit uint64) string {
	if limit >= math.MaxInt64 {
		return "none"
	}
	return fmt.Sprintf("%d MiB", limit>>20)
}
