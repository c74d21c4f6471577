package gateway_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// The members API says where each member runs (the address and
// User-Agent of its last heartbeat, its instanceId) and marks a live
// member late once its last heartbeat is older than two intervals, until
// its lease ends; so do the Grafana member rows.
func TestMembersSayWhereEachRunsAndWhoIsLate(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	cfg := assign.Config{}.EnsureDefaults()
	s := coordtest.Start(t, "", coordtest.Options{Now: clock, Group: cfg})
	s.CreateStream("orders", 2)
	m := coordtest.NewMember("pod-a-m0", "orders", "orders")
	m.InstanceID = "inst-1"
	m.Beat(s)

	members := func() protocol.Member {
		t.Helper()
		var resp protocol.MembersResponse
		s.JSON(http.MethodGet, coordclient.MonitoringGroupPath("orders", "orders", "members"), nil, http.StatusOK, &resp)
		if len(resp.Members) != 1 {
			t.Fatalf("members = %+v", resp.Members)
		}
		return resp.Members[0]
	}
	got := members()
	if got.ClientAddress != "127.0.0.1" || got.UserAgent != "Go-http-client/1.1" || got.InstanceID != "inst-1" || got.Late {
		t.Fatalf("member = %+v, want 127.0.0.1, Go's agent, inst-1, not late", got)
	}
	advance(2*cfg.HeartbeatInterval + time.Millisecond)
	if got := members(); !got.Late {
		t.Fatalf("member two intervals after its heartbeat = %+v, want late", got)
	}
	var rows []map[string]any
	s.JSON(http.MethodGet, "/coord/v1/monitoring/grafana/members", nil, http.StatusOK, &rows)
	if len(rows) != 1 || rows[0]["late"] != true || rows[0]["clientAddress"] != "127.0.0.1" || rows[0]["instanceId"] != "inst-1" {
		t.Fatalf("grafana member rows = %+v", rows)
	}
	advance(cfg.MemberLease)
	if got := members(); got.Late {
		t.Fatalf("member past its lease = %+v, want not late (dead)", got)
	}
}
