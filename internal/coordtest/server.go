package coordtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/protocol"
)

// Server is a running coordinator on a real Pebble directory and real HTTP.
type Server struct {
	t     testing.TB
	Dir   string
	Store *persistence.PebbleStore
	Coord *actors.Coordinator
	HTTP  *httptest.Server
	URL   string
}

// Options tune a test server; zero values take the protocol defaults.
type Options struct {
	Group            assign.Config
	AutoCreateGroups bool
	Now              func() time.Time
}

// Start opens dir (a fresh t.TempDir() when empty) and serves it. The
// server is stopped at the end of the test unless stopped before.
func Start(t testing.TB, dir string, opts Options) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	store, err := persistence.OpenPebble(dir, persistence.Options{Logger: log})
	if err != nil {
		t.Fatalf("open pebble at %s: %v", dir, err)
	}
	coord, err := actors.Start(context.Background(), actors.Config{
		Store: store, Group: opts.Group, AutoCreateGroups: opts.AutoCreateGroups, Logger: log, Now: opts.Now,
	})
	if err != nil {
		store.Close()
		t.Fatalf("start coordinator: %v", err)
	}
	srv := httptest.NewServer(gateway.New(coord, gateway.Options{Logger: log}))
	s := &Server{t: t, Dir: dir, Store: store, Coord: coord, HTTP: srv, URL: srv.URL}
	t.Cleanup(s.Stop)
	return s
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// Stop shuts the server down in production order; calling it twice is fine.
func (s *Server) Stop() {
	if s.HTTP == nil || s.Coord == nil {
		return
	}
	s.Coord.BeginShutdown()
	s.HTTP.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Coord.Close(ctx); err != nil {
		s.t.Errorf("close coordinator: %v", err)
	}
	if err := s.Store.Close(); err != nil {
		s.t.Errorf("close store: %v", err)
	}
	s.HTTP = nil
}

// Do sends a request with body (marshalled to JSON unless it is a string or
// []byte, sent as is) and returns the status and raw answer.
func (s *Server) Do(method, path string, body any) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			s.t.Fatalf("marshal body: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.t.Fatalf("new request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("read answer of %s %s: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// JSON sends a request, requires status want and decodes the answer into out.
func (s *Server) JSON(method, path string, body any, want int, out any) {
	s.t.Helper()
	status, raw := s.Do(method, path, body)
	if status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, raw)
	}
	CheckNoNullArrays(s.t, raw)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("decode answer of %s %s: %v: %s", method, path, err, raw)
		}
	}
}

// CreateStream creates prefix with shards shards (and its default group).
func (s *Server) CreateStream(prefix string, shards int) {
	s.t.Helper()
	s.JSON(http.MethodPost, protocol.BasePath+"/streams/"+prefix,
		protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: "test"}, http.StatusCreated, nil)
}

// Heartbeat posts req for its member and returns the decoded answer, which
// must be a 200.
func (s *Server) Heartbeat(prefix, group string, req protocol.HeartbeatRequest) protocol.HeartbeatResponse {
	s.t.Helper()
	var resp protocol.HeartbeatResponse
	s.JSON(http.MethodPost, protocol.BasePath+"/streams/"+prefix+"/groups/"+group+"/members/"+req.MemberID+"/heartbeat",
		req, http.StatusOK, &resp)
	return resp
}

// nullable lists the response fields that may be JSON null: objects and
// times that are absent. No array is among them.
var nullable = map[string]bool{
	"activeMigration": true, "lastHeartbeatAt": true, "memberLeaseExpiresAt": true,
	"rebalanceDeadlineAt": true, "activeReshardingId": true, "ackedAt": true,
}

// CheckNoNullArrays fails the test if raw holds a null anywhere but in a
// field that is documented nullable: the reference clients crash on null
// arrays.
func CheckNoNullArrays(t testing.TB, raw []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return // not JSON; the caller's decode reports it
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if e == nil && !nullable[k] {
					t.Errorf("%s.%s is null: %s", path, k, raw)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				if e == nil {
					t.Errorf("%s[%d] is null", path, i)
				}
				walk(path, e)
			}
		}
	}
	walk("$", v)
}

// Remote is a Server handle for a coordinator running elsewhere (a built
// binary, say): only its URL is known, and Stop does nothing.
func Remote(t testing.TB, url string) *Server {
	return &Server{t: t, URL: url}
}
