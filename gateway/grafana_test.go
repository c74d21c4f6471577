package gateway_test

import (
	"net/http"
	"testing"

	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

func TestGrafanaRows(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	s.CreateStream("payments", 2)
	a := coordtest.NewMember("a", "orders", "orders")
	b := coordtest.NewMember("b", "orders", "orders")
	a.Beat(s)
	b.Beat(s)
	coordtest.Converge(t, s, 6, a, b)

	var groups []gateway.GrafanaGroupRow
	s.JSON(http.MethodGet, base+"/monitoring/grafana/groups", nil, http.StatusOK, &groups)
	if len(groups) != 2 || groups[0].StreamPrefix != "orders" || groups[0].Members != 2 || groups[1].ShardCount != 2 {
		t.Fatalf("groups = %+v", groups)
	}
	s.JSON(http.MethodGet, base+"/monitoring/grafana/groups?streamPrefix=payments", nil, http.StatusOK, &groups)
	if len(groups) != 1 || groups[0].StreamPrefix != "payments" {
		t.Fatalf("filtered groups = %+v", groups)
	}

	var members []gateway.GrafanaMemberRow
	s.JSON(http.MethodGet, base+"/monitoring/grafana/members?streamPrefix=orders&consumerGroup=orders", nil, http.StatusOK, &members)
	if len(members) != 2 || members[0].MemberID != "a" || members[0].CurrentShards != 2 || members[0].State != "ACTIVE" {
		t.Fatalf("members = %+v", members)
	}

	var rows []gateway.GrafanaAssignmentRow
	s.JSON(http.MethodGet, base+"/monitoring/grafana/assignments?streamPrefix=orders", nil, http.StatusOK, &rows)
	if len(rows) != 4 {
		t.Fatalf("assignment rows = %+v", rows)
	}
	for i, r := range rows {
		if r.Shard != i || !r.Settled || r.Target == "" || r.Target != r.Current || r.StreamKey != "orders:"+string(rune('0'+i)) {
			t.Fatalf("row %d = %+v", i, r)
		}
	}

	var opts []gateway.GrafanaOption
	s.JSON(http.MethodGet, base+"/monitoring/grafana/options/streams", nil, http.StatusOK, &opts)
	if len(opts) != 2 || opts[0].Value != "orders" || opts[0].Text != "orders" {
		t.Fatalf("stream options = %+v", opts)
	}
	s.JSON(http.MethodGet, base+"/monitoring/grafana/options/consumer-groups?streamPrefix=orders", nil, http.StatusOK, &opts)
	if len(opts) != 1 || opts[0].Value != "orders" {
		t.Fatalf("group options = %+v", opts)
	}
	s.JSON(http.MethodGet, base+"/monitoring/grafana/options/shards?streamPrefix=orders", nil, http.StatusOK, &opts)
	if len(opts) != 4 || opts[3].Value != "3" {
		t.Fatalf("shard options = %+v", opts)
	}
	// No match is an empty array, never null.
	status, raw := s.Do(http.MethodGet, base+"/monitoring/grafana/members?streamPrefix=nope", nil)
	if status != http.StatusOK || string(raw) != "[]" {
		t.Fatalf("empty rows: %d %s", status, raw)
	}
}
