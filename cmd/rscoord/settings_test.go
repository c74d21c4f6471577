package main

import (
	"strings"
	"testing"
	"time"
)

// Every replica of a cluster must run with one member lease: a replica
// that loads a stream gives each member a fresh lease of its own
// --member-lease, while the members still read for the lease the previous
// owner answered (memberLeaseMs). With a shorter lease here, the shards of
// a member that may still be reading would be granted to another member
// before that member stops. A replica with another lease than the
// cluster's refuses to join, saying why; one with the same lease joins.
func TestClusterRefusesAnotherMemberLease(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	startReplica(t, c, "r1", freeLoopbackPort(t), "--member-lease", "30s")
	r2 := launchReplica(t, c, "r2", freeLoopbackPort(t), "--member-lease", "15s")
	if err := r2.proc.Wait(20 * time.Second); err == nil || strings.Contains(err.Error(), "did not exit within") {
		t.Fatalf("a replica with another member lease than the cluster's ran: %v\n%s", err, r2.proc.Output())
	}
	if out := r2.proc.Output(); !strings.Contains(out, "--member-lease 15s") || !strings.Contains(out, "30s") {
		t.Fatalf("the refusal does not name both leases:\n%s", out)
	}
	startReplica(t, c, "r3", freeLoopbackPort(t), "--member-lease", "30s")
}
