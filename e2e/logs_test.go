package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/poll"
)

// readJSONLines decodes every complete line of path into a T. A missing
// file is empty; a torn last line (a killed writer) is skipped, and any
// other line that does not decode fails the test: a log whose format
// changed must not quietly empty a check built on it.
func readJSONLines[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	var torn error // the last line's, if it is the last
	line := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line++
		if torn != nil {
			t.Fatalf("%s:%d: %v", path, line-1, torn)
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			torn = err
			continue
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// lineCount is how many complete lines path holds (0 for a missing file).
func lineCount(t testing.TB, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(raw, []byte("\n"))
}

// awaitLines waits until path holds at least n complete lines (a pod's
// records handled, a publisher's records published): the progress a
// fault waits for, so that it hits a run at work.
func awaitLines(t testing.TB, path string, n int, within time.Duration) {
	t.Helper()
	got := 0
	if !poll.Wait(within, 50*time.Millisecond, func() bool { got = lineCount(t, path); return got >= n }) {
		t.Fatalf("%s holds %d lines after %v, want %d", path, got, within, n)
	}
}

// interval is one member incarnation reading one shard from start to stop
// (ns). Two processes may share a member id, so the incarnation (the
// runtime's instanceId) is part of the key.
type interval struct {
	member, instance string
	start, stop      int64
}

// ownershipEvent is one line of a consumer pod's --ownership-log.
type ownershipEvent struct {
	MemberID   string `json:"memberId"`
	InstanceID string `json:"instanceId"`
	Shard      int    `json:"shard"`
	Event      string `json:"event"`
	AtNanos    int64  `json:"atUnixNano"`
}

// handledRecord is one line of a consumer pod's --events-log.
type handledRecord struct {
	MemberID   string `json:"memberId"`
	InstanceID string `json:"instanceId"`
	Shard      int    `json:"shard"`
	OwnerEpoch int64  `json:"ownerEpoch"`
	StreamKey  string `json:"streamKey"`
	RecordID   string `json:"recordId"`
	EventID    string `json:"eventId"`
	StartedAt  int64  `json:"startedAtUnixNano"`
}

// intervals pairs start and stop events per member incarnation and shard.
// A start without a stop (the pod was killed, or is still running) ends at
// openEnd of its pod. A start repeated while the window is open does not
// move its start: the incarnation read the shard since the first.
func intervals(events []ownershipEvent, openEnd int64) map[int][]interval {
	type key struct {
		member, instance string
		shard            int
	}
	open := map[key]int64{}
	out := map[int][]interval{}
	for _, e := range events {
		k := key{e.MemberID, e.InstanceID, e.Shard}
		switch e.Event {
		case "start":
			if _, ok := open[k]; !ok {
				open[k] = e.AtNanos
			}
		case "stop":
			if start, ok := open[k]; ok {
				out[e.Shard] = append(out[e.Shard], interval{e.MemberID, e.InstanceID, start, e.AtNanos})
				delete(open, k)
			}
		}
	}
	for k, start := range open {
		out[k.shard] = append(out[k.shard], interval{k.member, k.instance, start, openEnd})
	}
	return out
}

// overlaps lists every pair of different member incarnations whose
// reading of one shard overlapped in time.
func overlaps(byShard map[int][]interval) []string {
	var out []string
	for shard, ivs := range byShard {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
		for i := range ivs {
			for j := i + 1; j < len(ivs) && ivs[j].start < ivs[i].stop; j++ {
				if ivs[i].member != ivs[j].member || ivs[i].instance != ivs[j].instance {
					out = append(out, fmt.Sprintf("shard %d: %s/%s [%d,%d] overlaps %s/%s [%d,%d]",
						shard, ivs[i].member, ivs[i].instance, ivs[i].start, ivs[i].stop,
						ivs[j].member, ivs[j].instance, ivs[j].start, ivs[j].stop))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// outsideWindows lists every record whose handler started outside every
// ownership window of its own member incarnation for its shard (bounds
// included), with the nearest window of that incarnation, if any. The
// shard is the one the record's stream key names (what was read), not the
// runtime's label of it.
func outsideWindows(records []handledRecord, byShard map[int][]interval) []string {
	var out []string
	for _, r := range records {
		if shard, ok := keyShard(r.StreamKey); ok {
			r.Shard = shard
		}
		inside := false
		var nearest *interval
		var dist int64
		for i := range byShard[r.Shard] {
			iv := &byShard[r.Shard][i]
			if iv.member != r.MemberID || iv.instance != r.InstanceID {
				continue
			}
			if r.StartedAt >= iv.start && r.StartedAt <= iv.stop {
				inside = true
				break
			}
			d := max(iv.start-r.StartedAt, r.StartedAt-iv.stop)
			if nearest == nil || d < dist {
				nearest, dist = iv, d
			}
		}
		if inside {
			continue
		}
		where := "no window of its own for that shard"
		if nearest != nil {
			where = fmt.Sprintf("nearest window [%d,%d], %v away", nearest.start, nearest.stop, time.Duration(dist))
		}
		out = append(out, fmt.Sprintf("%s/%s shard %d record %s %s (ownerEpoch %d) started at %d: %s",
			r.MemberID, r.InstanceID, r.Shard, r.StreamKey, r.RecordID, r.OwnerEpoch, r.StartedAt, where))
	}
	sort.Strings(out)
	return out
}

// keyShard is the shard index a stream key names ("orders:3" → 3).
func keyShard(key string) (int, bool) {
	i := strings.LastIndexByte(key, ':')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(key[i+1:])
	return n, err == nil
}

// publishedIDs reads a publisher's --published-log and fails t unless it
// names exactly records distinct records.
func publishedIDs(t *testing.T, path string, records int) map[string]bool {
	t.Helper()
	type publishedRecord struct {
		EventID string `json:"eventId"`
	}
	want := map[string]bool{}
	for _, r := range readJSONLines[publishedRecord](t, path) {
		want[r.EventID] = true
	}
	if len(want) != records {
		t.Fatalf("publisher logged %d distinct records, want %d", len(want), records)
	}
	return want
}

// loggedIDs reads the --published-log of a publisher stopped by a signal
// (whatever it published by then) and fails t if it logged a record twice
// or none.
func loggedIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	type publishedRecord struct {
		EventID string `json:"eventId"`
	}
	lines := readJSONLines[publishedRecord](t, path)
	want := map[string]bool{}
	for _, r := range lines {
		want[r.EventID] = true
	}
	if len(want) == 0 || len(want) != len(lines) {
		t.Fatalf("publisher logged %d distinct records in %d lines, want as many and some", len(want), len(lines))
	}
	return want
}

// unhandled waits up to within for every id of want to show in some pod's
// events log, and returns the ids that never did.
func unhandled(t *testing.T, pods []*pod, want map[string]bool, within time.Duration) []string {
	t.Helper()
	var missing []string
	poll.Wait(within, 250*time.Millisecond, func() bool {
		seen := map[string]bool{}
		for _, p := range pods {
			for _, h := range readJSONLines[handledRecord](t, p.events) {
				seen[h.EventID] = true
			}
		}
		missing = missing[:0]
		for id := range want {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	})
	return missing
}

// stopPods sends SIGTERM to every pod at once, so that each leave's
// hand-off happens while the others still run, and records when each one
// exited: its open ownership windows end there.
func stopPods(t *testing.T, pods []*pod) {
	t.Helper()
	for _, p := range pods {
		if err := p.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := p.proc.Wait(30 * time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v", p.name, err)
		}
		p.end = time.Now().UnixNano()
	}
}

// checkPodLogs reads the ownership and events logs of pods (each pod's
// open windows end at its end) and fails t on overlapping windows and on
// records handled outside their own incarnation's window. It returns the
// windows by shard and the handled records.
func checkPodLogs(t *testing.T, pods []*pod) (map[int][]interval, []handledRecord) {
	t.Helper()
	byShard := map[int][]interval{}
	var records []handledRecord
	for _, p := range pods {
		if p.end == 0 {
			// Its open windows would end at 0, before they started, and
			// overlap nothing.
			t.Errorf("%s: end not set: stop or kill the pod and record when before checking its logs", p.name)
		}
		for shard, ivs := range intervals(readJSONLines[ownershipEvent](t, p.ownership), p.end) {
			byShard[shard] = append(byShard[shard], ivs...)
		}
		records = append(records, readJSONLines[handledRecord](t, p.events)...)
	}
	if o := overlaps(byShard); len(o) > 0 {
		t.Errorf("%d overlapping reads:\n%s", len(o), strings.Join(o, "\n"))
	}
	if o := outsideWindows(records, byShard); len(o) > 0 {
		t.Errorf("%d of %d records handled outside their member's window:\n%s", len(o), len(records), strings.Join(o[:min(50, len(o))], "\n"))
	}
	return byShard, records
}

func TestOverlapDetection(t *testing.T) {
	tests := []struct {
		name   string
		events []ownershipEvent
		want   int
	}{
		{"hand-off in order", []ownershipEvent{
			{"a", "1", 0, "start", 1}, {"a", "1", 0, "stop", 5}, {"b", "1", 0, "start", 6}, {"b", "1", 0, "stop", 9},
		}, 0},
		{"overlap", []ownershipEvent{
			{"a", "1", 0, "start", 1}, {"b", "1", 0, "start", 4}, {"a", "1", 0, "stop", 5}, {"b", "1", 0, "stop", 9},
		}, 1},
		{"killed owner still open", []ownershipEvent{
			{"a", "1", 1, "start", 1}, {"b", "1", 1, "start", 50},
		}, 1},
		{"same member twice", []ownershipEvent{
			{"a", "1", 2, "start", 1}, {"a", "1", 2, "stop", 3}, {"a", "1", 2, "start", 4}, {"a", "1", 2, "stop", 8},
		}, 0},
		{"two incarnations of one id overlap", []ownershipEvent{
			{"a", "1", 3, "start", 1}, {"a", "2", 3, "start", 2}, {"a", "2", 3, "stop", 4}, {"a", "1", 3, "stop", 6},
		}, 1},
		{"one id's stop does not close another incarnation's window", []ownershipEvent{
			{"a", "1", 4, "start", 1}, {"a", "2", 4, "stop", 4}, {"b", "1", 4, "start", 50},
		}, 1},
		// A start repeated without a stop in between (a runtime that
		// re-grants itself a shard it reads) must not move the window's
		// start: b read the shard while a already did.
		{"a repeated start keeps the first", []ownershipEvent{
			{"a", "1", 5, "start", 1}, {"b", "1", 5, "start", 2}, {"b", "1", 5, "stop", 3},
			{"a", "1", 5, "start", 4}, {"a", "1", 5, "stop", 6},
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Open intervals end at 100.
			if got := overlaps(intervals(tc.events, 100)); len(got) != tc.want {
				t.Fatalf("overlaps = %v, want %d", got, tc.want)
			}
		})
	}
}

func TestRecordOutsideWindow(t *testing.T) {
	// a/1 holds shard 0 over [10,20] and (open) [40,100]; a/2 shares the id
	// and holds shard 1 over [10,30].
	events := []ownershipEvent{
		{"a", "1", 0, "start", 10}, {"a", "1", 0, "stop", 20}, {"a", "1", 0, "start", 40},
		{"a", "2", 1, "start", 10}, {"a", "2", 1, "stop", 30},
	}
	rec := func(member, instance string, shard int, at int64) handledRecord {
		return handledRecord{MemberID: member, InstanceID: instance, Shard: shard, RecordID: "1-0", StartedAt: at}
	}
	keyed := func(r handledRecord, key string) handledRecord { r.StreamKey = key; return r }
	tests := []struct {
		name string
		rec  handledRecord
		want string // substring of the one violation, "" for none
	}{
		{"inside", rec("a", "1", 0, 15), ""},
		{"at the grant", rec("a", "1", 0, 10), ""},
		{"at the release", rec("a", "1", 0, 20), ""},
		{"inside the open window", rec("a", "1", 0, 99), ""},
		{"at the end of the run", rec("a", "1", 0, 100), ""},
		{"before the grant", rec("a", "1", 0, 9), "nearest window [10,20]"},
		{"between windows", rec("a", "1", 0, 35), "nearest window [40,100]"},
		{"after the end of the run", rec("a", "1", 0, 101), "nearest window [40,100]"},
		{"other incarnation of the same id", rec("a", "2", 0, 15), "no window of its own"},
		{"same id, other shard's window", rec("a", "1", 1, 15), "no window of its own"},
		{"other member", rec("b", "1", 0, 15), "no window of its own"},
		// The shard is what the record's key says, not what the runtime
		// labelled it: a record of orders:1 handed under a/1's window of
		// shard 0 was read outside any window for orders:1.
		{"key of another shard", keyed(rec("a", "1", 0, 15), "orders:1"), "no window of its own"},
		{"key of its shard", keyed(rec("a", "1", 0, 15), "orders:0"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := outsideWindows([]handledRecord{tc.rec}, intervals(events, 100))
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("outsideWindows = %v, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("outsideWindows = %v, want one containing %q", got, tc.want)
			}
		})
	}
}

// TestReadJSONLines: only a torn last line is skipped.
func TestReadJSONLines(t *testing.T) {
	type rec struct{ N int }
	dir := t.TempDir()
	write := func(name, text string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := readJSONLines[rec](t, write("ok", "{\"N\":1}\n{\"N\":2}\n")); len(got) != 2 || got[1].N != 2 {
		t.Fatalf("complete lines: %+v", got)
	}
	if got := readJSONLines[rec](t, write("torn", "{\"N\":1}\n{\"N\":")); len(got) != 1 {
		t.Fatalf("torn last line: %+v", got)
	}
	if got := readJSONLines[rec](t, dir+"/missing"); got != nil {
		t.Fatalf("missing file: %+v", got)
	}
	bad := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		readJSONLines[rec](bad, write("bad", "{\"N\":1}\nnot json\n{\"N\":3}\n"))
	}()
	<-done
	if bad.failed == "" {
		t.Fatal("a line that does not decode, before the last, was skipped; want the test failed")
	}
}

// fatalRecorder is a testing.TB whose Fatal and Fatalf record the failure
// and end the goroutine, as a test's do, without failing the test.
type fatalRecorder struct {
	testing.TB
	failed string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatal(args ...any) {
	f.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
