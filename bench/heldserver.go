package bench

// What a bench run reads of the server it loads: its memory, CPU and open
// files from /metrics and /debug/pprof, and its request histograms.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"

	"github.com/rscoord/rscoord/client/coordclient"
)

// ServerTimed is what one of the server's latency histograms counted over
// a span. Of rscoord_heartbeat_duration_seconds{held="false"} (answers
// sent at once, timed from decoded request to response) it leaves out the
// HTTP transport on both sides and every wait of the bench's own
// processes for a CPU, so on a machine the members share with the server
// it is the server's part of NotHeld; that count includes the held
// members' own requests without waitMs. Its percentiles are the
// histogram's bucket bounds (0.5 ms … 2.5 s) they fall under.
type ServerTimed struct {
	Count int `json:"count"`
	// P50 and P99 are upper bounds; -1 when past the last bucket.
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	// Within10ms is the share answered within 10 ms.
	Within10ms float64 `json:"within10ms"`
}

// histogramBuckets are the cumulative counts of one series of a
// histogram by upper bound, +Inf included.
type histogramBuckets map[float64]uint64

// serverHistograms are the series of the server's histograms a held run
// reports on, read once before and once after its measured phase.
type serverHistograms struct {
	// atOnce is rscoord_heartbeat_duration_seconds{held="false"}.
	atOnce histogramBuckets
	// groupWrites is rscoord_store_write_duration_seconds{kind="group"};
	// empty before the server's first group write.
	groupWrites histogramBuckets
}

// readServerHistograms reads the series serverHistograms holds from the
// server's /metrics.
func readServerHistograms(ctx context.Context, c *coordclient.Client) (serverHistograms, error) {
	families, err := serverMetrics(ctx, c)
	if err != nil {
		return serverHistograms{}, err
	}
	atOnce := histogramSeries(families, "rscoord_heartbeat_duration_seconds", "held", "false")
	if atOnce == nil {
		return serverHistograms{}, errors.New(`/metrics has no rscoord_heartbeat_duration_seconds{held="false"}`)
	}
	writes := histogramSeries(families, "rscoord_store_write_duration_seconds", "kind", "group")
	if writes == nil {
		writes = histogramBuckets{}
	}
	return serverHistograms{atOnce: atOnce, groupWrites: writes}, nil
}

// histogramSeries is the series of histogram name whose label is value,
// or nil when /metrics has none.
func histogramSeries(families map[string]*dto.MetricFamily, name, label, value string) histogramBuckets {
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != label || l.GetValue() != value || m.GetHistogram() == nil {
				continue
			}
			out := histogramBuckets{math.Inf(1): m.GetHistogram().GetSampleCount()}
			for _, b := range m.GetHistogram().GetBucket() {
				out[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			return out
		}
	}
	return nil
}

// timedBetween is what the histogram counted from before to after.
func timedBetween(before, after histogramBuckets) ServerTimed {
	bounds := slices.Sorted(maps.Keys(after))
	total := after[math.Inf(1)] - before[math.Inf(1)]
	t := ServerTimed{Count: int(total), P50: -1, P99: -1}
	if total == 0 {
		return t
	}
	for _, b := range bounds {
		within := after[b] - before[b]
		d := time.Duration(b * float64(time.Second))
		if math.IsInf(b, 1) {
			d = -1
		}
		if t.P50 == -1 && 2*within >= total && d >= 0 {
			t.P50 = d
		}
		if t.P99 == -1 && 100*within >= 99*total && d >= 0 {
			t.P99 = d
		}
		if b == 0.01 {
			t.Within10ms = float64(within) / float64(total)
		}
	}
	return t
}

// ReadServerMemory collects garbage on the server and reads its memory:
// heap and stacks from /debug/pprof/heap?gc=1&debug=1 (runtime.MemStats
// after a GC), RSS from process_resident_memory_bytes in /metrics. admin
// needs the ADMIN role.
func ReadServerMemory(ctx context.Context, admin *coordclient.Client) (ServerMemory, error) {
	var m ServerMemory
	raw, err := admin.Do(ctx, http.MethodGet, "/debug/pprof/heap?gc=1&debug=1", nil, nil)
	if err != nil {
		return m, fmt.Errorf("server memory: %w", err)
	}
	stats := memStats(raw)
	var ok1, ok2 bool
	m.HeapAlloc, ok1 = stats["HeapAlloc"]
	m.StackInuse, ok2 = stats["Stack"]
	if !ok1 || !ok2 {
		return m, errors.New("server memory: the heap profile lists no HeapAlloc or Stack")
	}
	families, err := serverMetrics(ctx, admin)
	if err != nil {
		return m, fmt.Errorf("server memory: %w", err)
	}
	rss, err := metricValue(families, "process_resident_memory_bytes")
	if err != nil {
		return m, fmt.Errorf("server memory: %w", err)
	}
	m.RSS = uint64(rss)
	return m, nil
}

// ServerProcess is what a coordinator's /metrics tells of its process
// (client_golang's process collector, Linux only): the CPU time it has
// used and the file descriptors it holds open.
type ServerProcess struct {
	CPU     time.Duration
	OpenFDs int
}

// ReadServerProcess reads process_cpu_seconds_total and process_open_fds
// from the server's /metrics: how a run measures a coordinator it did not
// start, on this host or another. The CPU time counts in the kernel's
// clock ticks (10 ms), plenty over a measured phase of seconds; each read
// costs the server a scrape.
func ReadServerProcess(ctx context.Context, c *coordclient.Client) (ServerProcess, error) {
	families, err := serverMetrics(ctx, c)
	if err != nil {
		return ServerProcess{}, fmt.Errorf("server process: %w", err)
	}
	cpu, err := metricValue(families, "process_cpu_seconds_total")
	if err != nil {
		return ServerProcess{}, fmt.Errorf("server process: %w", err)
	}
	fds, err := metricValue(families, "process_open_fds")
	if err != nil {
		return ServerProcess{}, fmt.Errorf("server process: %w", err)
	}
	return ServerProcess{CPU: time.Duration(cpu * float64(time.Second)), OpenFDs: int(fds)}, nil
}

// serverMetrics reads and parses the server's /metrics.
func serverMetrics(ctx context.Context, c *coordclient.Client) (map[string]*dto.MetricFamily, error) {
	raw, err := c.Do(ctx, http.MethodGet, "/metrics", nil, nil)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return families, nil
}

// metricValue is the value of the one unlabelled gauge or counter name.
func metricValue(families map[string]*dto.MetricFamily, name string) (float64, error) {
	f := families[name]
	if f == nil || len(f.GetMetric()) != 1 {
		return 0, fmt.Errorf("/metrics has no single %s (the process collector reads /proc: Linux only)", name)
	}
	switch m := f.GetMetric()[0]; {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), nil
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), nil
	}
	return 0, fmt.Errorf("/metrics: %s is neither a gauge nor a counter", name)
}

// memStats reads the "# Name = value" lines net/http/pprof appends to a
// debug=1 heap profile (runtime.MemStats).
func memStats(profile []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok || strings.ContainsAny(name, " \t") {
			continue
		}
		// "Stack = inuse / sys" names two figures: the first is in use.
		value, _, _ = strings.Cut(value, " ")
		if v, err := strconv.ParseUint(value, 10, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// openFiles is cfg.OpenFiles(), or -1 without it.
func openFiles(cfg HeldConfig) (int, error) {
	if cfg.OpenFiles == nil {
		return -1, nil
	}
	n, err := cfg.OpenFiles()
	if err != nil {
		return -1, fmt.Errorf("held: server's open files: %w", err)
	}
	return n, nil
}

// steadyOpenFiles is openFiles once it stopped changing for 100 ms (the
// server closes its side of the connections the bench just closed a
// little later), or after 2 s.
func steadyOpenFiles(ctx context.Context, cfg HeldConfig) (int, error) {
	last, err := openFiles(cfg)
	for try := 0; err == nil && try < 20 && ctx.Err() == nil; try++ {
		time.Sleep(100 * time.Millisecond)
		var n int
		if n, err = openFiles(cfg); err == nil && n == last {
			break
		}
		last = n
	}
	return last, err
}

// loadAverage is the 1-minute load average, or -1 where the system does
// not tell.
func loadAverage() float64 {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return -1
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return -1
	}
	return l.Load1
}
