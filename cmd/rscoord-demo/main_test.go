package main

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestCreateStream runs the demo's calls against a real coordinator with
// authentication on: it waits for /healthz and creates the stream as the
// admin, and a wrong password comes back as the wire layer's 401.
func TestCreateStream(t *testing.T) {
	hash, err := auth.HashPassword("demo-admin-pw", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	srv := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{
		Users: []auth.User{{Username: "admin", PasswordHash: hash, Roles: auth.Admin}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	coord, err := newClient(srv.URL, "demo-admin-pw")
	if err != nil {
		t.Fatal(err)
	}
	defer coord.CloseIdleConnections()
	if err := waitHealthy(ctx, coord, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := createStream(ctx, coord, "orders", 3); err != nil {
		t.Fatal(err)
	}
	var group protocol.GroupResponse
	if _, err := coord.Do(ctx, http.MethodGet, coordclient.GroupPath("orders", "orders"), nil, &group); err != nil {
		t.Fatalf("the demo's group: %v", err)
	}
	if group.ShardCount != 3 {
		t.Errorf("group has %d shards, want 3", group.ShardCount)
	}

	wrong, err := newClient(srv.URL, "not-the-password")
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.CloseIdleConnections()
	if err := createStream(ctx, wrong, "other", 1); !errors.Is(err, coordclient.ErrUnauthorized) {
		t.Errorf("create with a wrong password: %v, want a 401", err)
	}
}
