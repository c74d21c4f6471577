package persistence

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

var (
	t0  = time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	cet = time.FixedZone("CET", 3600)
)

// richGroup is a group with a member in every state, targets, draining
// shards, an active migration and every non-durable field set. Shard sets
// are already clean and times UTC, so its durable view is exactly what a
// store must give back.
func richGroup(prefix, name string) *assign.Group {
	member := func(id string, state protocol.MemberState, epoch int64, current, revoking, granted []int) *assign.Member {
		return &assign.Member{
			ID:                   id,
			Name:                 "pod-" + id,
			State:                state,
			Epoch:                epoch,
			PreviousEpoch:        epoch - 1,
			MetadataVersion:      11,
			MaxConcurrency:       4,
			AvailableConcurrency: 3,
			Current:              current,
			Revoking:             revoking,
			Granted:              granted,
			Reported:             state != protocol.MemberStarting,
			Progress: []protocol.ShardProgress{{
				Shard: protocol.Shard{ShardIndex: 0}, StreamKey: "orders:0",
				LastDeliveredID: "5-0", LastAckedID: "4-0", PendingCount: 1, UpdatedAt: t0,
			}},
			JoinedAt:          t0.Add(-time.Hour),
			LastHeartbeat:     t0.Add(-time.Second),
			LeaseExpiresAt:    t0.Add(14 * time.Second),
			RebalanceDeadline: t0.Add(time.Minute),
			StateChangedAt:    t0.Add(-time.Minute),
			InstanceID:        "inst-" + id,
			JoinRequestID:     "req-" + id,
			ReadableUntil:     t0.Add(10 * time.Second),
		}
	}
	g := &assign.Group{
		StreamPrefix:    prefix,
		Name:            name,
		State:           protocol.GroupReconciling,
		GroupEpoch:      42,
		AssignmentEpoch: 41,
		MetadataVersion: 12,
		ShardCount:      4,
		DrainingShards:  []int{4, 5},
		Members: map[string]*assign.Member{
			"m-active":   member("m-active", protocol.MemberActive, 41, []int{0, 1}, []int{5}, []int{0, 1}),
			"m-starting": member("m-starting", protocol.MemberStarting, 42, []int{}, []int{}, []int{}),
			"m-leaving":  member("m-leaving", protocol.MemberLeaving, -1, []int{}, []int{4}, []int{}),
			"m@expired":  member("m@expired", protocol.MemberExpired, 30, []int{}, []int{}, []int{}),
			"m:fenced":   member("m:fenced", protocol.MemberFenced, 31, []int{}, []int{}, []int{}),
		},
		Target: map[string][]int{
			"m-active":   {0, 1, 4},
			"m-starting": {2, 3, 5},
		},
		CorrectionOpen: true,
		ActiveMigration: &protocol.Migration{
			ReshardingID: "rs-1", FromShardCount: 6, ToShardCount: 4,
			State: protocol.MigrationActive, CreatedAt: t0.Add(-10 * time.Minute), UpdatedAt: t0,
		},
		CreatedAt:   t0.Add(-24 * time.Hour),
		OwnerEpochs: []int64{3, 4, 0, 0, 7, 2},
	}
	g.Members["m-active"].Withdrawn = []assign.Withdrawal{{Shard: 5, Version: 11}}
	g.Members["m-active"].JoinVersion = 7
	g.Members["m-active"].JoinSeq = 3
	g.Members["m-leaving"].Withdrawn = []assign.Withdrawal{{Shard: 4, Version: 9}}
	g.Members["m-starting"].RebalanceDeadline = time.Time{}
	g.Members["m-starting"].InstanceID = ""
	return g
}

// durable is g as a store gives it back: a deep copy without the non-durable
// member fields. Written out field by field on purpose: it must not share
// code with the encoder it checks.
func durable(g *assign.Group) *assign.Group {
	c := durableAs(g, true)
	for _, m := range c.Members {
		m.MetadataVersion, m.MaxConcurrency, m.AvailableConcurrency = 0, 0, 0
	}
	if g.OwnerEpochs != nil {
		c.OwnerEpochs = append([]int64{}, g.OwnerEpochs...)
	}
	return c
}

// durableV1 is g as a schema-1 record gave it back: with the members'
// reported metadata version and capacity.
func durableV1(g *assign.Group) *assign.Group {
	c := durableAs(g, false)
	c.OwnerEpochs = nil
	return c
}

func durableAs(g *assign.Group, withIncarnation bool) *assign.Group {
	c := *g
	c.DrainingShards = append([]int{}, g.DrainingShards...)
	c.Members = map[string]*assign.Member{}
	for id, m := range g.Members {
		mc := *m
		mc.Current = append([]int{}, m.Current...)
		mc.Revoking = append([]int{}, m.Revoking...)
		mc.Granted = append([]int{}, m.Granted...)
		mc.Withdrawn = append([]assign.Withdrawal(nil), m.Withdrawn...)
		mc.Progress = nil
		mc.LastHeartbeat = time.Time{}
		mc.LeaseExpiresAt = time.Time{}
		mc.ReadableUntil = time.Time{}
		if !withIncarnation {
			mc.InstanceID, mc.JoinRequestID = "", ""
			mc.Withdrawn, mc.JoinVersion, mc.JoinSeq = nil, 0, 0 // schema 1 had none of them
		}
		c.Members[id] = &mc
	}
	c.Target = map[string][]int{}
	for id, s := range g.Target {
		c.Target[id] = append([]int{}, s...)
	}
	if g.ActiveMigration != nil {
		m := *g.ActiveMigration
		c.ActiveMigration = &m
	}
	return &c
}

func richStream(prefix string) StreamRecord {
	return StreamRecord{
		StreamPrefix:    prefix,
		ShardCount:      4,
		DrainingShards:  []int{4, 5},
		MetadataVersion: 12,
		Migrations: []MigrationRecord{
			{
				Migration: protocol.Migration{
					ReshardingID: "rs-0", FromShardCount: 2, ToShardCount: 6,
					State: protocol.MigrationDeprecated, CreatedAt: t0.Add(-2 * time.Hour), UpdatedAt: t0.Add(-time.Hour),
				},
				RequestedBy: "alice", Reason: "peak", ActivatedAt: t0.Add(-2 * time.Hour),
				RetiredShards: []int{},
			},
			{
				Migration: protocol.Migration{
					ReshardingID: "rs-1", FromShardCount: 6, ToShardCount: 4,
					State: protocol.MigrationActive, CreatedAt: t0.Add(-10 * time.Minute), UpdatedAt: t0,
				},
				RequestedBy: "bob", Reason: "quiet", ActivatedAt: t0.Add(-9 * time.Minute),
				RetiredShards: []int{}, Note: "redis not configured",
			},
		},
		CreatedAt: t0.Add(-24 * time.Hour),
	}
}

func assertEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s differs\n got: %s\nwant: %s", what, dump(got), dump(want))
	}
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// testLogger sends log lines to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
