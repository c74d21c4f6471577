package replica

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
)

func part(id, body string) listPart {
	return listPart{replica: cluster.Replica{ID: id, AdvertiseURL: "http://" + id}, body: []byte(body)}
}

// The merges of the cluster-wide lists: each replica's part once, sorted,
// and a part that does not parse named missing rather than failing the
// list; only this replica's own answer not parsing is an error.
func TestMergeClusterLists(t *testing.T) {
	self := cluster.Replica{ID: "r1", AdvertiseURL: "http://r1"}
	down := protocol.MissingReplica{ID: "r4", AdvertiseURL: "http://r4", Units: []string{"stream/d"}, Error: "no answer within 2s"}
	cases := []struct {
		name    string
		merge   listMerge
		local   string
		parts   []listPart
		missing []protocol.MissingReplica
		want    string // the merged JSON
		inBody  bool
		// wantMissing are the ids named missing after the merge.
		wantMissing []string
		wantErr     bool
	}{
		{
			name: "groups from every replica, sorted, a moved group once", merge: mergeGroups,
			local: `{"groups":[{"streamPrefix":"b","consumerGroup":"b"}]}`,
			parts: []listPart{
				part("r2", `{"groups":[{"streamPrefix":"a","consumerGroup":"z"},{"streamPrefix":"a","consumerGroup":"a"}]}`),
				part("r3", `{"groups":[{"streamPrefix":"b","consumerGroup":"b"}]}`),
			},
			want:   `["a/a","a/z","b/b"]`,
			inBody: true,
		},
		{
			name: "groups with a replica missing and one answering nonsense", merge: mergeGroups,
			local:   `{"groups":[]}`,
			parts:   []listPart{part("r2", `<html>`), part("r3", `{"groups":[{"streamPrefix":"c","consumerGroup":"c"}]}`)},
			missing: []protocol.MissingReplica{down},
			want:    `["c/c"]`, inBody: true, wantMissing: []string{"r4", "r2"},
		},
		{
			name: "groups: this replica's answer broken", merge: mergeGroups,
			local: `nope`, wantErr: true,
		},
		{
			name: "health: every replica, DEGRADED when one is missing", merge: mergeHealth,
			local:   `{"status":"UP","coordinatorId":"c1","redis":"NOT_CONFIGURED","redisDetail":{"status":"NOT_CONFIGURED"},"loop":"UP","loopDetail":{"status":"UP"},"store":{"status":"UP"}}`,
			parts:   []listPart{part("r3", `{"status":"UP","redis":"UP","redisDetail":{"status":"UP"},"loop":"UP","loopDetail":{"status":"UP"},"store":{"status":"UP"}}`)},
			missing: []protocol.MissingReplica{down},
			want:    `DEGRADED r1:UP r3:UP r4:DOWN`, inBody: true, wantMissing: []string{"r4"},
		},
		{
			name: "health: another replica DEGRADED says why", merge: mergeHealth,
			local: `{"status":"UP","redis":"UP","redisDetail":{"status":"UP"},"loop":"UP","loopDetail":{"status":"UP"},"store":{"status":"UP"}}`,
			parts: []listPart{part("r2", `{"status":"DEGRADED","redis":"DOWN","redisDetail":{"status":"DOWN","message":"refused"},"loop":"UP","loopDetail":{"status":"UP"},"store":{"status":"UP"}}`)},
			want:  `DEGRADED r1:UP r2:DEGRADED(redis DOWN: refused)`, inBody: true,
		},
		{
			name: "grafana rows sorted by stream and group, missing in the header", merge: mergeRows,
			local:       `[{"streamPrefix":"b","consumerGroup":"b","shard":1},{"streamPrefix":"b","consumerGroup":"b","shard":0}]`,
			parts:       []listPart{part("r2", `[{"streamPrefix":"a","consumerGroup":"a","shard":0}]`), part("r3", `{}`)},
			missing:     []protocol.MissingReplica{down},
			want:        `[{"streamPrefix":"a","consumerGroup":"a","shard":0},{"streamPrefix":"b","consumerGroup":"b","shard":1},{"streamPrefix":"b","consumerGroup":"b","shard":0}]`,
			wantMissing: []string{"r4", "r3"},
		},
		{
			name: "shard options once each, in numeric order", merge: mergeOptions,
			local: `[{"__text":"0","__value":"0"},{"__text":"1","__value":"1"}]`,
			parts: []listPart{part("r2", `[{"__text":"0","__value":"0"},{"__text":"1","__value":"1"},{"__text":"2","__value":"2"},{"__text":"10","__value":"10"}]`)},
			want:  `[{"__text":"0","__value":"0"},{"__text":"1","__value":"1"},{"__text":"2","__value":"2"},{"__text":"10","__value":"10"}]`,
		},
		{
			name: "name options in name order", merge: mergeOptions,
			local: `[{"__text":"orders","__value":"orders"}]`,
			parts: []listPart{part("r2", `[{"__text":"billing","__value":"billing"},{"__text":"2","__value":"2"}]`)},
			want:  `[{"__text":"2","__value":"2"},{"__text":"billing","__value":"billing"},{"__text":"orders","__value":"orders"}]`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &listParts{self: self, local: []byte(tc.local), parts: tc.parts, missing: tc.missing}
			merged, inBody, err := tc.merge(l)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if inBody != tc.inBody {
				t.Errorf("missing in the body: %v, want %v", inBody, tc.inBody)
			}
			var got string
			switch m := merged.(type) {
			case protocol.GroupsResponse:
				var names []string
				for _, g := range m.Groups {
					names = append(names, g.StreamPrefix+"/"+g.ConsumerGroup)
				}
				raw, _ := json.Marshal(names)
				got = string(raw)
				if len(m.MissingReplicas) != len(l.missing) {
					t.Errorf("missingReplicas %+v, want %+v", m.MissingReplicas, l.missing)
				}
			case protocol.Health:
				got = m.Status
				for _, r := range m.Replicas {
					got += " " + r.ID + ":" + r.Status
					if r.Message != "" && r.Status != protocol.HealthDown {
						got += "(" + r.Message + ")"
					}
				}
			default:
				raw, _ := json.Marshal(m)
				got = string(raw)
			}
			if got != tc.want {
				t.Errorf("merged %s\nwant   %s", got, tc.want)
			}
			var ids []string
			for _, m := range l.missing {
				ids = append(ids, m.ID)
			}
			if strings.Join(ids, ",") != strings.Join(tc.wantMissing, ",") {
				t.Errorf("missing %v, want %v", ids, tc.wantMissing)
			}
		})
	}
}
