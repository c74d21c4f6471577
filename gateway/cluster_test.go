package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// TestClusterRoute checks GET /coord/v1/monitoring/cluster: 404 without
// the cluster hook, READ required, the hook's answer as it is.
func TestClusterRoute(t *testing.T) {
	t.Parallel()
	const path = protocol.BasePath + "/monitoring/cluster"
	alone := serveFake(t, newFake(), fakeOptions{Auth: true})
	status, raw := alone.As(coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader))).Do(http.MethodGet, path, nil)
	if status != http.StatusNotFound {
		t.Fatalf("alone: %d %s, want 404", status, raw)
	}

	want := protocol.ClusterResponse{
		Store:  "etcd",
		Self:   protocol.ClusterReplica{ID: "r1", AdvertiseURL: "http://127.0.0.1:1", Live: true, Role: protocol.RoleOwner, Units: []string{"coordinator"}, GroupsOwned: 1},
		Groups: []protocol.ClusterGroup{{StreamPrefix: "orders", ConsumerGroup: "orders", Owner: "r1", OwnerURL: "http://127.0.0.1:1"}},
	}
	want.Replicas = []protocol.ClusterReplica{want.Self}
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Gateway: gateway.Options{
		Cluster: func(context.Context) (protocol.ClusterResponse, error) { return want, nil },
	}})
	for _, tc := range []struct {
		user   string
		status int
	}{{"", http.StatusUnauthorized}, {coordtest.UserMember, http.StatusForbidden}, {coordtest.UserReader, http.StatusOK}, {coordtest.UserMonitor, http.StatusOK}} {
		authz := ""
		if tc.user != "" {
			authz = coordtest.Basic(tc.user, coordtest.Password(tc.user))
		}
		status, raw := s.As(authz).Do(http.MethodGet, path, nil)
		if status != tc.status {
			t.Fatalf("%q: %d %s, want %d", tc.user, status, raw, tc.status)
		}
		if status != http.StatusOK {
			continue
		}
		var got protocol.ClusterResponse
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.Self.ID != "r1" || len(got.Replicas) != 1 || got.Groups[0].Owner != "r1" || got.Replicas[0].Role != protocol.RoleOwner {
			t.Fatalf("answer %s", raw)
		}
	}
}
