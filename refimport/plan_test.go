package refimport

import (
	"reflect"
	"strings"
	"testing"
)

func TestNewPlan(t *testing.T) {
	g := func(stream, name string, shards int, migs ...Migration) Group {
		return Group{StreamPrefix: stream, ConsumerGroup: name, SchemaVersion: 1, ShardCount: shards,
			MetadataVersion: 40, GroupEpoch: 7, Migrations: migs}
	}
	none := Existing{}
	for _, tc := range []struct {
		name     string
		groups   []Group
		existing Existing
		want     []Action
		refused  map[string]string // stream → part of the reason
	}{
		{
			name:   "two groups of one stream, one of another",
			groups: []Group{g("orders", "billing", 4), g("orders", "orders", 4), g("pay", "pay", 2)},
			want: []Action{
				{StreamPrefix: "orders", ConsumerGroup: "billing", ShardCount: 4, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40},
				{StreamPrefix: "orders", ConsumerGroup: "orders", ShardCount: 4, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40},
				{StreamPrefix: "pay", ConsumerGroup: "pay", ShardCount: 2, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40},
			},
		},
		{
			name: "finished migrations do not count",
			groups: []Group{g("orders", "orders", 8, Migration{ID: "m1", FromShardCount: 4, ToShardCount: 8, State: "DEPRECATED"},
				Migration{ID: "m2", FromShardCount: 8, ToShardCount: 2, State: "ROLLED_BACK"})},
			want: []Action{{StreamPrefix: "orders", ConsumerGroup: "orders", ShardCount: 8, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40}},
		},
		{
			name:   "a scale-out in flight imports its target",
			groups: []Group{g("orders", "orders", 4, Migration{ID: "m1", FromShardCount: 4, ToShardCount: 8, State: "ACTIVE"})},
			want: []Action{{StreamPrefix: "orders", ConsumerGroup: "orders", ShardCount: 8, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40,
				Note: "scale-out m1 (4→8, ACTIVE) in flight: imported at 8 shards, every old shard among them"}},
		},
		{
			name:    "a scale-in in flight refuses the stream alone",
			groups:  []Group{g("orders", "orders", 2, Migration{ID: "m1", FromShardCount: 8, ToShardCount: 2, State: "DRAINING"}), g("pay", "pay", 2)},
			want:    []Action{{StreamPrefix: "pay", ConsumerGroup: "pay", ShardCount: 2, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40}},
			refused: map[string]string{"orders": "migration m1 (8→2, DRAINING) in flight: finish it or roll it back"},
		},
		{
			name:    "preparing and rolling back refuse",
			groups:  []Group{g("a", "a", 4, Migration{ID: "m", FromShardCount: 4, ToShardCount: 8, State: "PREPARING"}), g("b", "b", 4, Migration{ID: "n", FromShardCount: 4, ToShardCount: 8, State: "ROLLING_BACK"})},
			refused: map[string]string{"a": "(4→8, PREPARING) in flight", "b": "(4→8, ROLLING_BACK) in flight"},
		},
		{
			name:    "groups that disagree on the count",
			groups:  []Group{g("orders", "a", 4), g("orders", "b", 8)},
			refused: map[string]string{"orders": "disagree on the shard count: 4 (a), 8 (b)"},
		},
		{
			name:    "bad names, counts and schemas",
			groups:  []Group{g("bad stream", "a", 4), g("ok", "bad group", 4), g("zero", "z", 0), {StreamPrefix: "new", ConsumerGroup: "n", SchemaVersion: 2, ShardCount: 1}},
			refused: map[string]string{"bad stream": "stream", "ok": `group "bad group"`, "zero": "0 shards", "new": "schemaVersion 2"},
		},
		{
			name: "the floor is the highest number of the group and its members",
			groups: []Group{
				{StreamPrefix: "a", ConsumerGroup: "a", SchemaVersion: 1, ShardCount: 1, MetadataVersion: 40, GroupEpoch: 7, AssignmentEpoch: 55},
				{StreamPrefix: "b", ConsumerGroup: "b", SchemaVersion: 1, ShardCount: 1, MetadataVersion: 40, GroupEpoch: 7, MemberEpoch: 60, MemberMetadataVersion: 41},
				{StreamPrefix: "c", ConsumerGroup: "c", SchemaVersion: 1, ShardCount: 1, MetadataVersion: 40, GroupEpoch: 7, CorrectionVersion: 900},
				{StreamPrefix: "d", ConsumerGroup: "d", SchemaVersion: 1, ShardCount: 1, MetadataVersion: -3},
			},
			want: []Action{
				{StreamPrefix: "a", ConsumerGroup: "a", ShardCount: 1, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 55},
				{StreamPrefix: "b", ConsumerGroup: "b", ShardCount: 1, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 60},
				{StreamPrefix: "c", ConsumerGroup: "c", ShardCount: 1, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 900},
				{StreamPrefix: "d", ConsumerGroup: "d", ShardCount: 1, ReferenceMetadataVersion: -3},
			},
		},
		{
			name:    "a number rscoord cannot start above",
			groups:  []Group{{StreamPrefix: "big", ConsumerGroup: "big", SchemaVersion: 1, ShardCount: 1, MetadataVersion: 1 << 60}},
			refused: map[string]string{"big": "version 1152921504606846976; rscoord starts groups above at most 9007199254740991"},
		},
		{
			name: "what rscoord holds already",
			existing: Existing{Streams: map[string]int{"orders": 4, "pay": 3, "ok": 1}, Groups: map[[2]string]bool{{"orders", "orders"}: true, {"ok", "ok"}: true},
				Highest: map[[2]string]int64{{"orders", "orders"}: 40, {"ok", "ok"}: 41}},
			groups: []Group{g("orders", "orders", 4), g("orders", "new", 4), g("pay", "pay", 2), g("ok", "ok", 1)},
			want: []Action{
				{StreamPrefix: "ok", ConsumerGroup: "ok", ShardCount: 1, Exists: true, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40},
				{StreamPrefix: "orders", ConsumerGroup: "orders", ShardCount: 4, Exists: true, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40,
					Note: "rscoord's group is at 40, not above the reference's 40: start the reference's members again as new processes"},
				{StreamPrefix: "orders", ConsumerGroup: "new", ShardCount: 4, ReferenceMetadataVersion: 40, ReferenceGroupEpoch: 7, VersionFloor: 40},
			},
			refused: map[string]string{"pay": "rscoord has this stream with 3 shards, the reference 2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			existing := tc.existing
			if existing.Streams == nil {
				existing = none
			}
			p := NewPlan(tc.groups, existing)
			if !reflect.DeepEqual(p.Actions, tc.want) && (len(p.Actions) != 0 || len(tc.want) != 0) {
				t.Errorf("actions:\n got %+v\nwant %+v", p.Actions, tc.want)
			}
			if len(p.Refusals) != len(tc.refused) {
				t.Errorf("refusals %+v, want %d", p.Refusals, len(tc.refused))
			}
			for _, r := range p.Refusals {
				if want, ok := tc.refused[r.StreamPrefix]; !ok || !strings.Contains(r.Reason, want) {
					t.Errorf("refusal of %s: %q, want it to say %q", r.StreamPrefix, r.Reason, want)
				}
			}
		})
	}
}
