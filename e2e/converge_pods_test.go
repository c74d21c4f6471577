package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/internal/proctest"
)

// joinConvergeLimit is how soon after a pod's members join every member of
// the group must own its target, at the default 3 s heartbeat interval:
// held heartbeats tell the members that give shards up at once, instead of
// at their next heartbeat.
const joinConvergeLimit = 1500 * time.Millisecond

// TestPodJoinConvergesWithinRoundTrips runs real member runtimes (consumer
// pods) over Redis against a coordinator with the default heartbeat
// interval: 3 pods settle on 24 shards, then a fourth pod joins while the
// others sit in their held heartbeats; every member owns its target within
// 1.5 s of the newcomer's join.
func TestPodJoinConvergesWithinRoundTrips(t *testing.T) {
	b := build(t)
	rs := redistest.Standalone(t)
	dir := t.TempDir()
	// The defaults: the later flags override startCoordinator's short
	// test timings.
	_, url := startCoordinator(t, b.coordinator, filepath.Join(dir, "coord"), "--redis", rs.Addr,
		"--heartbeat-interval", protocol.DefaultHeartbeatInterval.String(), "--member-lease", defaultLease.String())
	s := remote(t, url)
	s.CreateStream("orders", 24)
	var pods []*pod
	for i := range 3 {
		pods = append(pods, startDefaultPod(t, b.consumer, url, rs.Addr, dir, fmt.Sprintf("pod-%d", i)))
	}
	if !poll.Wait(60*time.Second, 50*time.Millisecond, func() bool {
		a := assignments(t, s)
		return len(a.TargetAssignment) == 6 && converged(a) // 3 pods × 2 members
	}) {
		t.Fatalf("3 pods never settled: %+v", assignments(t, s))
	}
	// Let the members park their steady heartbeats at some point of their
	// 3 s hold: the join then comes in the middle of it, where a member
	// that waited for its next heartbeat would take longer than the limit.
	poll.Hold(t.Context(), 1200*time.Millisecond)

	joiner := startDefaultPod(t, b.consumer, url, rs.Addr, dir, "pod-3")
	pods = append(pods, joiner)
	var joined time.Time
	var a protocol.AssignmentsResponse
	var took time.Duration
	if !poll.Wait(30*time.Second, 10*time.Millisecond, func() bool {
		now := time.Now()
		a = assignments(t, s)
		if joined.IsZero() && hasMemberOf(a, joiner.name) {
			joined = now
		}
		took = now.Sub(joined)
		return !joined.IsZero() && len(a.TargetAssignment) == 8 && converged(a)
	}) {
		t.Fatalf("never converged after the join: %+v", a)
	}
	t.Logf("every member owns its target %v after the fourth pod joined", took)
	if took > joinConvergeLimit {
		t.Fatalf("converged %v after the join, want within %v", took, joinConvergeLimit)
	}
	stopPods(t, pods)
	checkPodLogs(t, pods)
}

// defaultLease is the member lease of rscoord serve and of the member
// runtime by default.
const defaultLease = 15 * time.Second

// startDefaultPod runs a consumer pod of orders/orders with two members and
// the member runtime's default timings.
func startDefaultPod(t *testing.T, bin, url, redisAddr, dir, name string) *pod {
	t.Helper()
	p := &pod{name: name, events: filepath.Join(dir, name+"-events.jsonl"), ownership: filepath.Join(dir, name+"-ownership.jsonl")}
	p.proc = proctest.Start(t, name, bin, []string{
		"--coordinator", url, "--redis", redisAddr, "--stream", "orders", "--group", "orders",
		"--concurrency", "2", "--workers", "2", "--handler-delay", "1ms",
		"--events-log", p.events, "--ownership-log", p.ownership,
	}, append(memberEnv(), "POD_NAME="+name)...)
	return p
}

func assignments(t *testing.T, s *coordtest.Server) protocol.AssignmentsResponse {
	t.Helper()
	var a protocol.AssignmentsResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/assignments", nil, http.StatusOK, &a)
	return a
}

// converged: every member was granted its whole target and nothing is being
// revoked.
func converged(a protocol.AssignmentsResponse) bool {
	for m, target := range a.TargetAssignment {
		want, got := protocol.Indexes(target), protocol.Indexes(a.CurrentAssignments[m])
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) || len(a.RevokeProgress[m]) > 0 {
			return false
		}
	}
	return true
}

func hasMemberOf(a protocol.AssignmentsResponse, pod string) bool {
	for m := range a.TargetAssignment {
		if len(m) > len(pod) && m[:len(pod)+1] == pod+"-" {
			return true
		}
	}
	return false
}
