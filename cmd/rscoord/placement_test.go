package main

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
)

// groupOwners is who runs each group of view, by "prefix/group".
func groupOwners(view protocol.ClusterResponse) map[string]string {
	out := map[string]string{}
	for _, g := range view.Groups {
		out[g.StreamPrefix+"/"+g.ConsumerGroup] = g.Owner
	}
	return out
}

// awaitPlacement waits until the replica at url sees every group of
// names run by a live replica other than not, and returns the owners.
func awaitPlacement(t *testing.T, url string, names []string, not string) map[string]string {
	t.Helper()
	var view protocol.ClusterResponse
	var owners map[string]string
	if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		var ok bool
		view, ok = clusterView(url)
		live := map[string]bool{}
		for _, r := range view.Replicas {
			live[r.ID] = r.Live && r.ID != not
		}
		owners = groupOwners(view)
		done := ok
		for _, n := range names {
			if !live[owners[n+"/"+n]] {
				done = false
			}
		}
		return done
	}) {
		t.Fatalf("groups not placed on live replicas (not %q): %+v", not, view)
	}
	return owners
}

// Three replicas run different streams (each with its group); the
// replica running some of them is SIGKILLed: its groups move to the
// others within its lease, every member keeps its shards and is never
// told anything but OK or RETRY (none fails closed), and epochs never go
// back. When it comes back, placement gives it streams again, and the
// members still keep their shards.
func TestClusterPlacementSpreads(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	ports := map[string]int{}
	reps := map[string]*replicaProc{}
	for _, name := range []string{"r1", "r2", "r3"} {
		ports[name] = freeLoopbackPort(t)
		reps[name] = startReplica(t, c, name, ports[name])
	}
	names := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	servers := []*coordtest.Server{asMember(t, reps["r1"].url), asMember(t, reps["r2"].url), asMember(t, reps["r3"].url)}
	var members []*coordtest.Member
	for i, n := range names {
		asAdmin(t, servers[i%3].URL).CreateStream(n, 4)
		m := coordtest.NewMember("m-"+n, n, n)
		coordtest.Converge(t, servers[(i+1)%3], 6, m)
		members = append(members, m)
	}
	owners := awaitPlacement(t, reps["r1"].url, names, "")
	byOwner := map[string][]string{}
	for _, n := range names {
		byOwner[owners[n+"/"+n]] = append(byOwner[owners[n+"/"+n]], n)
	}
	if len(byOwner) < 2 {
		t.Fatalf("every group runs on one replica: %v", byOwner)
	}
	t.Logf("placement: %v", byOwner)
	victim := owners["s0/s0"]
	var survivors []*coordtest.Server
	for _, name := range []string{"r1", "r2", "r3"} {
		if name != victim {
			survivors = append(survivors, asMember(t, reps[name].url))
		}
	}
	owned := make([][]int, len(members))
	before := make([]protocol.GroupResponse, len(members))
	for i, m := range members {
		owned[i] = slices.Clone(m.Owned)
		asAdmin(t, survivors[0].URL).JSON("GET", protocol.BasePath+"/streams/"+m.Prefix+"/groups/"+m.Group, nil, 200, &before[i])
	}

	// checkRound heartbeats every member through the survivors until each
	// got an OK, failing on any answer but OK or RETRY.
	checkRound := func(phase string) time.Duration {
		start := time.Now()
		ok := make([]bool, len(members))
		if poll.Wait(30*time.Second, 50*time.Millisecond, func() bool {
			all := true
			for i, m := range members {
				if ok[i] {
					continue
				}
				hb, err := tryBeat(survivors[i%len(survivors)], m)
				if err != nil {
					t.Fatalf("%s: heartbeat of %s: %v", phase, m.ID, err)
				}
				switch hb.Status {
				case protocol.StatusOK:
					ok[i] = true
				case protocol.StatusRetry:
					all = false
				default:
					t.Fatalf("%s: heartbeat of %s answered %+v", phase, m.ID, hb)
				}
			}
			return all
		}) {
			return time.Since(start)
		}
		t.Fatalf("%s: not every member got an OK heartbeat in 30 s", phase)
		return 0
	}

	if err := reps[victim].proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = reps[victim].proc.Wait(10 * time.Second)
	took := checkRound("after the SIGKILL of " + victim)
	t.Logf("every member served again %v after the SIGKILL of %s (which ran %v)", took, victim, byOwner[victim])
	after := awaitPlacement(t, survivors[0].URL, names, victim)
	for i, m := range members {
		if !slices.Equal(m.Owned, owned[i]) {
			t.Fatalf("%s lost shards: %v → %v", m.ID, owned[i], m.Owned)
		}
		var g protocol.GroupResponse
		asAdmin(t, survivors[1].URL).JSON("GET", protocol.BasePath+"/streams/"+m.Prefix+"/groups/"+m.Group, nil, 200, &g)
		if g.GroupEpoch < before[i].GroupEpoch || g.AssignmentEpoch < before[i].AssignmentEpoch || g.MetadataVersion < before[i].MetadataVersion {
			t.Fatalf("%s: epochs went back: %+v → %+v", m.Group, before[i], g)
		}
		if o := owners[m.Group+"/"+m.Group]; o != victim && after[m.Group+"/"+m.Group] != o {
			t.Fatalf("%s moved from the live %s to %s", m.Group, o, after[m.Group+"/"+m.Group])
		}
	}

	// The replica comes back: rendezvous hashing places its streams on it
	// again, and it claims them once the others released them.
	reps[victim] = startReplica(t, c, victim, ports[victim])
	survivors = append(survivors, asMember(t, reps[victim].url))
	var view protocol.ClusterResponse
	if !poll.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		view, _ = clusterView(reps[victim].url)
		back := groupOwners(view)
		return slices.ContainsFunc(byOwner[victim], func(n string) bool { return back[n+"/"+n] == victim })
	}) {
		t.Fatalf("%s came back but runs none of %v: %+v", victim, byOwner[victim], view)
	}
	checkRound("after " + victim + " came back")
	for i, m := range members {
		if !slices.Equal(m.Owned, owned[i]) {
			t.Fatalf("%s lost shards after %s came back: %v → %v", m.ID, victim, owned[i], m.Owned)
		}
	}
	_, _, raw := get(t, reps[victim].url+"/metrics")
	if !strings.Contains(string(raw), fmt.Sprintf(`rscoord_cluster_placement_moves_total{direction="claimed"} %d`, len(byOwner[victim]))) {
		t.Fatalf("placement moves of %s (it runs %v again):\n%s", victim, byOwner[victim], grepLines(raw, "placement_moves"))
	}
	for _, r := range reps {
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range reps {
		if err := r.proc.Wait(20 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, r.proc.Output())
		}
	}
}

// A replica restarted at once after a SIGKILL (as a supervisor does) finds
// its previous run still registered under a lease that has not lapsed: it
// waits for the lease instead of failing, then serves.
func TestClusterReplicaRestartedAtOnce(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	port := freeLoopbackPort(t)
	r1 := startReplica(t, c, "r1", port)
	if err := r1.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r1.proc.Wait(10 * time.Second)
	r1 = startReplica(t, c, "r1", port)
	if !strings.Contains(r1.proc.Output(), "replica id still registered") {
		t.Fatalf("the restarted replica did not wait for its previous run's lease:\n%s", r1.proc.Output())
	}
	if err := r1.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r1.proc.Wait(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, r1.proc.Output())
	}
}
