package persistence

import (
	"testing"
	"time"
)

// testStreamAutoscaleRoundTrip: the autoscaling policy and its last
// decision live in the stream record, survive a restart, and a record
// without them (written before they existed) loads with none.
func testStreamAutoscaleRoundTrip(t *testing.T, e engine) {
	s := e.open(t)
	want := richStream("orders")
	want.Autoscale = &AutoscaleRecord{
		Mode: "dry-run", MaxShardLength: 3000, MaxShardMemoryBytes: 64 << 20, MaxShardAppendsPerSecond: 2.5,
		LowWatermark: 0.25, MinShards: 2, MaxShards: 8, Cooldown: 1500 * time.Millisecond,
		RequestedBy: "alice", UpdatedAt: t0,
		LastDecision: &AutoscaleDecisionRecord{Action: "scale-out", From: 4, To: 6, Reason: "shard 1 length 4000 is over 3000", At: t0.Add(time.Minute)},
	}
	rev, err := s.SaveStream(ctx, want, 0)
	if err != nil {
		t.Fatal(err)
	}
	plain := StreamRecord{StreamPrefix: "billing", ShardCount: 1}
	if _, err := s.SaveStream(ctx, plain, 0); err != nil {
		t.Fatal(err)
	}
	want.Revision = rev
	check := func(t *testing.T, s Store) {
		got, err := s.LoadStreams(ctx)
		if err != nil || len(got) != 2 {
			t.Fatalf("LoadStreams = %s, %v", dump(got), err)
		}
		assertEqual(t, "stream orders", got[1], want)
		if got[0].Autoscale != nil {
			t.Errorf("a record saved without a policy loads with %+v", got[0].Autoscale)
		}
	}
	t.Run("before restart", func(t *testing.T) { check(t, s) })
	s = e.reopen(t, s)
	t.Run("after restart", func(t *testing.T) { check(t, s) })
}
