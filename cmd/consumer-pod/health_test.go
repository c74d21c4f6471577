package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// TestPodReadiness runs the pod binary with --health-listen against a real
// coordinator and Redis: /readyz answers 503 while the pod cannot join
// (Redis down from the start), 200 once it joined and reads its shards,
// 503 again after Redis went away and the pod gave its shards back, and
// 503 while it leaves; /livez and /metrics answer throughout, and --probe
// exits 0 exactly when /readyz answers 200.
func TestPodReadiness(t *testing.T) {
	const (
		prefix = "ready"
		shards = 2
		lease  = 2 * time.Second
	)
	t.Parallel()
	srv := redistest.Standalone(t)
	coord := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true, Group: assign.Config{
		HeartbeatInterval: 200 * time.Millisecond, ReconcileInterval: 50 * time.Millisecond, MemberLease: lease,
	}})
	coord.CreateStream(prefix, shards)
	ctx := context.Background()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}

	pd := startPod(t, nil,
		"--coordinator", coord.URL, "--redis", srv.Addr, "--stream", prefix, "--member-lease", lease.String(),
		"--base-id", "ready", "--block", "100ms", "--leave-timeout", "5s", "--health-listen", "127.0.0.1:0")

	// The listener's address, from the pod's log.
	addrRE := regexp.MustCompile(`serving /readyz, /livez and /metrics.* addr=(\S+)`)
	var base string
	waitFor(t, 15*time.Second, "the health listener", pd, func() bool {
		if m := addrRE.FindStringSubmatch(pd.Output()); m != nil {
			base = "http://" + m[1]
			return true
		}
		return false
	})
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v; pod output:\n%s", path, err, pd.Output())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ready := func() (int, readyBody) {
		t.Helper()
		code, raw := get("/readyz")
		var body readyBody
		if err := json.Unmarshal([]byte(raw), &body); err != nil {
			t.Fatalf("/readyz body %q: %v", raw, err)
		}
		if body.Ready != (code == http.StatusOK) || body.Stream != prefix || body.Group != prefix || len(body.Members) != 1 {
			t.Fatalf("/readyz %d %+v", code, body)
		}
		return code, body
	}
	probeExit := func() int {
		t.Helper()
		out, err := exec.Command(podBin, "--probe", base+"/readyz").CombinedOutput()
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatalf("--probe: %v\n%s", err, out)
		return -1
	}

	// Redis down from the start: the member never joins.
	waitFor(t, 10*time.Second, "the member to say Redis is down", pd, func() bool {
		_, body := ready()
		return body.Members[0].State == "REDIS_DOWN"
	})
	if code, body := ready(); code != http.StatusServiceUnavailable || body.Members[0].Reason == "" {
		t.Fatalf("before the join: /readyz %d %+v", code, body)
	}
	if cur := assignments(t, coord, prefix); len(cur) != 0 {
		t.Fatalf("a pod without Redis joined: %v", cur)
	}
	if code := probeExit(); code != exitError {
		t.Fatalf("--probe of a pod that is not ready exited %d", code)
	}
	if code, body := get("/livez"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/livez %d %q", code, body)
	}

	// Redis answers: the pod joins, owns every shard and is ready.
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := redistest.CreateShards(ctx, srv.Client(), prefix, shards, prefix); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "/readyz 200 with both shards owned", pd, func() bool {
		code, body := ready()
		return code == http.StatusOK && len(body.Members[0].Owned) == shards && len(assignments(t, coord, prefix)["ready-m0"]) == shards
	})
	if code := probeExit(); code != exitOK {
		t.Fatalf("--probe of a ready pod exited %d", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `rscoord_member_ready{group="ready",stream="ready"} 1`) || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics %d:\n%s", code, body)
	}
	if code, _ := get("/nope"); code != http.StatusNotFound {
		t.Fatalf("/nope answered %d", code)
	}

	// Redis goes away: after three failed reads the pod gives its shards
	// back and is not ready.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "/readyz 503 after Redis went away", pd, func() bool {
		code, body := ready()
		return code == http.StatusServiceUnavailable && body.Members[0].State == "REDIS_DOWN"
	})
	waitFor(t, 10*time.Second, "the shards given back", pd, func() bool {
		return len(assignments(t, coord, prefix)["ready-m0"]) == 0
	})

	stopPod(t, pd)
}

// TestProbeUsage: --probe needs no --stream, and a pod without --stream is
// a usage error.
func TestProbeUsage(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"--probe", "http://127.0.0.1:1/readyz"}, &out); code != exitError ||
		!strings.Contains(out.String(), "--probe") {
		t.Fatalf("--probe of nothing listening: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"--redis", "127.0.0.1:1"}, &out); code != exitUsage ||
		!strings.Contains(out.String(), "--stream") {
		t.Fatalf("no --stream: exit %d: %s", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"--stream", "x", "--redis", "127.0.0.1:1", "--health-listen", "127.0.0.1:-1"}, &out); code != exitError ||
		!strings.Contains(out.String(), "--health-listen") {
		t.Fatalf("bad --health-listen: exit %d: %s", code, out.String())
	}
}

// assignments is the coordinator's view of prefix's default group:
// memberId → shards it holds now.
func assignments(t *testing.T, coord *coordtest.Server, prefix string) map[string][]protocol.Shard {
	t.Helper()
	var out struct {
		CurrentAssignments map[string][]protocol.Shard `json:"currentAssignments"`
	}
	coord.JSON(http.MethodGet, "/coord/v1/monitoring/streams/"+prefix+"/groups/"+prefix+"/assignments", nil, http.StatusOK, &out)
	return out.CurrentAssignments
}

// waitFor waits until cond holds, at most d, and fails t with the pod's
// output if it never does.
func waitFor(t *testing.T, d time.Duration, what string, pd *proctest.Process, cond func() bool) {
	t.Helper()
	if !poll.Wait(d, poll.Interval, cond) {
		t.Fatalf("timed out after %v waiting for %s; pod output:\n%s", d, what, pd.Output())
	}
}
