package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"testing"
)

// readJSONLines decodes every complete line of path into a T. A missing
// file is empty; a torn last line (a killed writer) is skipped.
func readJSONLines[T any](t *testing.T, path string) []T {
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
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			continue
		}
		out = append(out, v)
	}
	return out
}

// interval is one member reading one shard from start to stop (ns).
type interval struct {
	member      string
	start, stop int64
}

// ownershipEvent is one line of a consumer pod's --ownership-log.
type ownershipEvent struct {
	MemberID string `json:"memberId"`
	Shard    int    `json:"shard"`
	Event    string `json:"event"`
	AtNanos  int64  `json:"atUnixNano"`
}

// intervals pairs start and stop events per member and shard. A start
// without a stop (the pod was killed, or is still running) ends at
// openEnd of its pod.
func intervals(events []ownershipEvent, openEnd int64) map[int][]interval {
	type key struct {
		member string
		shard  int
	}
	open := map[key]int64{}
	out := map[int][]interval{}
	for _, e := range events {
		k := key{e.MemberID, e.Shard}
		switch e.Event {
		case "start":
			open[k] = e.AtNanos
		case "stop":
			if start, ok := open[k]; ok {
				out[e.Shard] = append(out[e.Shard], interval{e.MemberID, start, e.AtNanos})
				delete(open, k)
			}
		}
	}
	for k, start := range open {
		out[k.shard] = append(out[k.shard], interval{k.member, start, openEnd})
	}
	return out
}

// overlaps lists every pair of different members whose reading of one
// shard overlapped in time.
func overlaps(byShard map[int][]interval) []string {
	var out []string
	for shard, ivs := range byShard {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
		for i := range ivs {
			for j := i + 1; j < len(ivs) && ivs[j].start < ivs[i].stop; j++ {
				if ivs[i].member != ivs[j].member {
					out = append(out, fmt.Sprintf("shard %d: %s [%d,%d] overlaps %s [%d,%d]",
						shard, ivs[i].member, ivs[i].start, ivs[i].stop, ivs[j].member, ivs[j].start, ivs[j].stop))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestOverlapDetection(t *testing.T) {
	tests := []struct {
		name   string
		events []ownershipEvent
		want   int
	}{
		{"hand-off in order", []ownershipEvent{
			{"a", 0, "start", 1}, {"a", 0, "stop", 5}, {"b", 0, "start", 6}, {"b", 0, "stop", 9},
		}, 0},
		{"overlap", []ownershipEvent{
			{"a", 0, "start", 1}, {"b", 0, "start", 4}, {"a", 0, "stop", 5}, {"b", 0, "stop", 9},
		}, 1},
		{"killed owner still open", []ownershipEvent{
			{"a", 1, "start", 1}, {"b", 1, "start", 50},
		}, 1},
		{"same member twice", []ownershipEvent{
			{"a", 2, "start", 1}, {"a", 2, "stop", 3}, {"a", 2, "start", 4}, {"a", 2, "stop", 8},
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// "killed owner still open": a's open interval ends at 100, after b started.
			if got := overlaps(intervals(tc.events, 100)); len(got) != tc.want {
				t.Fatalf("overlaps = %v, want %d", got, tc.want)
			}
		})
	}
}
