package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

func TestMain(m *testing.M) {
	b, err := proctest.NewBuilder(proctest.RaceFlags()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	podBin, err = b.Build(ctx, "github.com/rscoord/rscoord/cmd/consumer-pod")
	cancel()
	if err != nil {
		b.Close()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leakcheck.VerifyTestMain(m, goleak.Cleanup(func(code int) { b.Close(); os.Exit(code) }))
}

func TestUsage(t *testing.T) {
	var out bytes.Buffer
	// --stream is the one required flag: coordinator and Redis default to
	// the local ones, as in publisher-pod.
	if code := run(context.Background(), []string{"--redis", "127.0.0.1:1"}, &out); code != exitUsage {
		t.Fatalf("exit code %d, want %d: %s", code, exitUsage, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"--coordinator", "http://x", "--redis", "r:1", "--stream", "x", "--ack-mode", "nope"}, &out); code != exitUsage {
		t.Fatalf("exit code %d, want %d: %s", code, exitUsage, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"--coordinator", "ftp://x", "--redis", "127.0.0.1:1", "--stream", "x"}, &out); code != exitError ||
		!strings.Contains(out.String(), "WithCoordinator") {
		t.Fatalf("exit code %d, want %d with the option problem: %s", code, exitError, out.String())
	}
}

// podBin is the consumer-pod binary, built once by TestMain (with -race
// when the test runs with it: sharing the race-instrumented build cache,
// and checking the pod).
var podBin string

// startPod starts the pod with args, env added to the test's environment;
// it is killed when the test ends, unless it exited before.
func startPod(t *testing.T, env []string, args ...string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, "consumer-pod", podBin, args, env...)
}

// stopPod sends SIGTERM and fails the test unless the pod exits 0 within
// 15 s: a pod leaves its group and stops cleanly on SIGTERM.
func stopPod(t *testing.T, pd *proctest.Process) {
	t.Helper()
	if err := pd.Stop(15 * time.Second); err != nil {
		t.Fatalf("pod after SIGTERM: %v; output:\n%s", err, pd.Output())
	}
}

// readLines decodes every complete JSON line of path; a last line still
// being written (no newline yet) is left for the next read.
func readLines[T any](t *testing.T, path string) []T {
	t.Helper()
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(raw, '\n'); i >= 0 {
		raw = raw[:i+1]
	} else {
		raw = nil
	}
	var out []T
	for _, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, line, err)
		}
		out = append(out, v)
	}
	return out
}

// TestPodHandlesAndLeavesOnSIGTERM builds the pod, runs it with two members
// against a real coordinator and Redis, and checks both logs and a clean
// exit on SIGTERM.
func TestPodHandlesAndLeavesOnSIGTERM(t *testing.T) {
	const (
		prefix = "pod"
		shards = 3
		n      = 30
		lease  = 2 * time.Second
	)
	t.Parallel()
	dir := t.TempDir()
	srv := redistest.Standalone(t)
	rdb := srv.Client()
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: assign.Config{
		HeartbeatInterval: 200 * time.Millisecond, ReconcileInterval: 50 * time.Millisecond, MemberLease: lease,
	}})
	coord.CreateStream(prefix, shards)
	ctx := context.Background()
	if err := redistest.CreateShards(ctx, rdb, prefix, shards, prefix); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		key := protocol.StreamKey(prefix, i%shards)
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: map[string]any{"eventId": fmt.Sprintf("ev-%d", i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	events, ownership := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "ownership.jsonl")
	pd := startPod(t, nil,
		"--coordinator", coord.URL, "--redis", srv.Addr, "--stream", prefix,
		"--concurrency", "2", "--workers", "2", "--handler-delay", "2ms", "--member-lease", lease.String(),
		"--events-log", events, "--ownership-log", ownership, "--ack-mode", "ackdel",
		"--base-id", "pod-test", "--block", "100ms", "--leave-timeout", "5s", "--log-level", "debug")

	awaitHandled(t, pd, events, n, 20*time.Second)
	// Let the second member take its share before the pod leaves.
	waitOwners(t, ownership, 2, 10*time.Second, pd)

	stopPod(t, pd)
	for i := range shards {
		if l := rdb.XLen(ctx, protocol.StreamKey(prefix, i)).Val(); l != 0 {
			t.Errorf("shard %d still holds %d records after ackdel", i, l)
		}
	}

	// Ownership: per shard, start/stop alternate per member, every start
	// is stopped by the end, and no two members' intervals overlap.
	lines := readLines[ownershipLine](t, ownership)
	type span struct {
		member     string
		start, end int64
	}
	spans := map[int][]*span{}
	open := map[string]*span{}
	for _, l := range lines {
		k := fmt.Sprintf("%s/%d", l.MemberID, l.Shard)
		switch l.Event {
		case "start":
			if open[k] != nil {
				t.Fatalf("%s started twice without a stop", k)
			}
			open[k] = &span{member: l.MemberID, start: l.AtUnixNano}
			spans[l.Shard] = append(spans[l.Shard], open[k])
		case "stop":
			if open[k] == nil {
				t.Fatalf("%s stopped without a start", k)
			}
			open[k].end = l.AtUnixNano
			open[k] = nil
		default:
			t.Fatalf("bad ownership line %+v", l)
		}
	}
	for k, s := range open {
		if s != nil {
			t.Errorf("%s was never stopped", k)
		}
	}
	if len(spans) != shards {
		t.Errorf("ownership log covers shards %v, want all %d", spans, shards)
	}
	for shard, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
		for i := 1; i < len(ss); i++ {
			if ss[i-1].end > ss[i].start {
				t.Errorf("shard %d: %s until %d overlaps %s from %d", shard, ss[i-1].member, ss[i-1].end, ss[i].member, ss[i].start)
			}
		}
	}
	if !strings.Contains(pd.Output(), "left the group") {
		t.Errorf("the pod did not log its leave; output:\n%s", pd.Output())
	}
}

// awaitHandled waits until the pod's events log names n distinct records.
func awaitHandled(t *testing.T, pd *proctest.Process, events string, n int, d time.Duration) {
	t.Helper()
	seen := map[string]bool{}
	if !poll.Wait(d, poll.Interval, func() bool {
		clear(seen)
		for _, e := range readLines[eventLine](t, events) {
			seen[e.EventID] = true
		}
		return len(seen) == n
	}) {
		t.Fatalf("only %d of %d records handled; pod output:\n%s", len(seen), n, pd.Output())
	}
}

// waitOwners waits until members distinct members have started a shard.
func waitOwners(t *testing.T, path string, members int, d time.Duration, pd *proctest.Process) {
	t.Helper()
	seen := map[string]bool{}
	if !poll.Wait(d, poll.Interval, func() bool {
		clear(seen)
		for _, l := range readLines[ownershipLine](t, path) {
			seen[l.MemberID] = true
		}
		return len(seen) >= members
	}) {
		t.Fatalf("only members %v read shards; output:\n%s", seen, pd.Output())
	}
}
