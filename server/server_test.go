package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// quietConfig is a single-node configuration on a free loopback port and
// a fresh data directory, authentication off.
func quietConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Auth = "127.0.0.1:0", t.TempDir(), false
	return cfg
}

// A server serves from Open on, Serve returns once its context ends, and
// everything it started has stopped by then (the leak check of TestMain).
func TestServeUntilCancelled(t *testing.T) {
	srv, err := Open(t.Context(), quietConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d %v", resp.StatusCode, body)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	if _, err := http.Get(srv.URL() + "/healthz"); err == nil {
		t.Fatal("still serving after Serve returned")
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatalf("a second close: %v", err)
	}
}

// Close without Serve stops the server, and the store can be opened again
// at once: it was closed.
func TestCloseWithoutServeReleasesTheStore(t *testing.T) {
	cfg := quietConfig(t)
	for range 2 {
		srv, err := Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if srv.Coordinator() == nil || srv.Store() == nil || srv.Metrics() == nil || srv.Authenticator() != nil {
			t.Fatal("accessors of a running server")
		}
		if err := srv.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if srv.Coordinator() != nil {
			t.Fatal("a closed server names a coordinator")
		}
	}
}

// Open refuses a configuration that does not validate, naming each
// setting, and a listen address in use without touching the store.
func TestOpenRefuses(t *testing.T) {
	cfg := quietConfig(t)
	cfg.Group.MemberLease = 0
	if _, err := Open(t.Context(), cfg); err == nil {
		t.Fatal("a zero member lease was taken")
	}
	first, err := Open(t.Context(), quietConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(context.Background())
	busy := quietConfig(t)
	busy.Listen = first.Addr().String()
	if _, err := Open(t.Context(), busy); err == nil {
		t.Fatal("an address in use was taken")
	}
}
