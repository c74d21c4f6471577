package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// builder builds publisher-pod once for the whole test binary.
var builder *proctest.Builder

func TestMain(m *testing.M) {
	b, err := proctest.NewBuilder()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builder = b
	leakcheck.VerifyTestMain(m, goleak.Cleanup(func(code int) { b.Close(); os.Exit(code) }))
}

// buildPod builds publisher-pod once per test run.
func buildPod(t *testing.T) string {
	t.Helper()
	bin, err := builder.Build(t.Context(), "github.com/rscoord/rscoord/cmd/publisher-pod")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// env is a coordinator with a stream whose shards exist in Redis.
type env struct {
	coord  *coordtest.Server
	rdb    redis.UniversalClient
	redis  string // --redis
	prefix string
	shards int
}

func newEnv(t *testing.T, cluster bool, shards int, provision bool) *env {
	t.Helper()
	e := &env{coord: coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true}), shards: shards}
	e.prefix = strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	if cluster {
		c := redistest.NewCluster(t)
		e.rdb, e.redis = c.Client(), strings.Join(c.Addrs, ",")
	} else {
		s := redistest.Standalone(t)
		e.rdb, e.redis = s.Client(), s.Addr
	}
	e.coord.CreateStream(e.prefix, shards)
	if provision {
		if err := redistest.CreateShards(context.Background(), e.rdb, e.prefix, shards, e.prefix); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) args(logPath string, extra ...string) []string {
	return append([]string{
		"--coordinator", e.coord.URL, "--redis", e.redis, "--stream", e.prefix,
		"--published-log", logPath, "--pod", "pod-a", "--log-level", "warn",
	}, extra...)
}

// readLog parses the published log.
func readLog(t *testing.T, path string) []publishedLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []publishedLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l publishedLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("published log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// recordsInRedis is the number of records in the shard streams of e.
func recordsInRedis(t *testing.T, e *env) int64 {
	t.Helper()
	var n int64
	for i := range e.shards {
		l, err := e.rdb.XLen(context.Background(), protocol.StreamKey(e.prefix, i)).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += l
	}
	return n
}

// checkLogMatchesRedis requires the published log and the shard streams to
// hold exactly the same records, with unique eventIds, and returns how many.
func checkLogMatchesRedis(t *testing.T, e *env, lines []publishedLine) int {
	t.Helper()
	type rec struct{ eventID, partitionKey string }
	inRedis := map[string]rec{} // streamKey/recordId → record
	for i := range e.shards {
		key := protocol.StreamKey(e.prefix, i)
		msgs, err := e.rdb.XRange(context.Background(), key, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			inRedis[key+"/"+m.ID] = rec{fmt.Sprint(m.Values["eventId"]), fmt.Sprint(m.Values["partitionKey"])}
		}
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l.EventID] {
			t.Fatalf("eventId %s logged twice", l.EventID)
		}
		seen[l.EventID] = true
		if !strings.HasPrefix(l.EventID, "pod-a-") {
			t.Fatalf("eventId %q does not start with the pod name", l.EventID)
		}
		got, ok := inRedis[l.StreamKey+"/"+l.RecordID]
		if !ok {
			t.Fatalf("logged record %+v is not in Redis", l)
		}
		if got.eventID != l.EventID || got.partitionKey != l.PartitionKey {
			t.Fatalf("Redis has %+v at %s/%s, log says %+v", got, l.StreamKey, l.RecordID, l)
		}
		if want := protocol.StreamKey(e.prefix, protocol.Route(l.PartitionKey, e.shards)); l.StreamKey != want {
			t.Fatalf("record %s of %s in %s, want %s", l.EventID, l.PartitionKey, l.StreamKey, want)
		}
		delete(inRedis, l.StreamKey+"/"+l.RecordID)
	}
	if len(inRedis) != 0 {
		t.Fatalf("%d records in Redis are not in the published log, e.g. %v", len(inRedis), firstKey(inRedis))
	}
	return len(lines)
}

func firstKey[V any](m map[string]V) string {
	for k := range m {
		return k
	}
	return ""
}

func TestPublishedLogMatchesRedis(t *testing.T) {
	t.Parallel()
	pod := buildPod(t)
	tests := []struct {
		name    string
		cluster bool
		extra   []string
	}{
		{"standalone single", false, []string{"--count", "300", "--key-space", "40"}},
		{"standalone batch paced", false, []string{"--count", "300", "--batch", "25", "--rate", "1500"}},
		{"cluster batch", true, []string{"--count", "300", "--batch", "50", "--key-space", "7"}},
		{"cluster single", true, []string{"--count", "200"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.cluster, 4, true)
			logPath := filepath.Join(t.TempDir(), "published.jsonl")
			p := proctest.Start(t, "publisher-pod", pod, e.args(logPath, tc.extra...))
			if err := p.Wait(time.Minute); err != nil {
				t.Fatalf("publisher-pod: %v\n%s", err, p.Output())
			}
			want := 300
			if tc.name == "cluster single" {
				want = 200
			}
			if n := checkLogMatchesRedis(t, e, readLog(t, logPath)); n != want {
				t.Fatalf("%d records published, want %d", n, want)
			}
		})
	}
}

func TestSIGTERMFlushesLog(t *testing.T) {
	t.Parallel()
	pod := buildPod(t)
	e := newEnv(t, false, 4, true)
	logPath := filepath.Join(t.TempDir(), "published.jsonl")
	p := proctest.Start(t, "publisher-pod", pod, e.args(logPath, "--count", "1000000", "--rate", "300", "--batch", "3"))
	// SIGTERM once the pod is publishing: some records are in Redis.
	if !poll.Wait(30*time.Second, 10*time.Millisecond, func() bool { return recordsInRedis(t, e) >= 10 }) {
		t.Fatalf("publisher-pod published nothing within 30 s\n%s", p.Output())
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("publisher-pod after SIGTERM: %v\n%s", err, p.Output())
	}
	n := checkLogMatchesRedis(t, e, readLog(t, logPath))
	if n == 0 || n >= 1000000 {
		t.Fatalf("%d records logged; want some, not all", n)
	}
	t.Logf("%d records published before SIGTERM", n)
}

func TestRunFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		provision bool
		stream    string // "" is the test's stream
		extra     []string
		wantCode  int
		wantErr   string
	}{
		{"unknown stream fails fast", true, "nosuch", nil, exitError, "STREAM_NOT_FOUND"},
		{"missing shard streams fail the records", false, "", []string{"--retry-timeout", "300ms", "--count", "3"}, exitError, "3 of 3 records failed"},
		{"bad flags", true, "", []string{"--batch", "0", "--key-space", "0"}, exitUsage, "--key-space 0"},
		{"unknown flag", true, "", []string{"--nope"}, exitUsage, "unknown flag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false, 2, tc.provision)
			if tc.stream != "" {
				e.prefix = tc.stream
			}
			logPath := filepath.Join(t.TempDir(), "published.jsonl")
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			code := run(ctx, e.args(logPath, tc.extra...), &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit code %d, want %d\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("stderr lacks %q:\n%s", tc.wantErr, stderr.String())
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s; want a quick failure", time.Since(start))
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--help exit code %d", code)
	}
	for _, flag := range []string{"--coordinator", "--redis", "--stream", "--group", "--count", "--rate", "--batch", "--published-log", "--key-space"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("help lacks %s", flag)
		}
	}
}
