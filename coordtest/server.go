package coordtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/metrics"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/server"
)

// Server is a running coordinator on a real Pebble directory and real HTTP.
type Server struct {
	t     testing.TB
	Dir   string
	Store *persistence.PebbleStore
	Coord *actors.Coordinator
	// Server is the running server; nil for a Remote handle and after Stop.
	Server *server.Server
	URL    string
	// Auth checks credentials; nil when authentication is off.
	Auth *auth.Authenticator
	// Metrics is the server's registry and observer.
	Metrics *metrics.Metrics
	// Authorization is sent as the Authorization header by Do (and so by
	// every helper); empty sends none. With Options.Auth set, Start makes
	// it Basic credentials of the ADMIN test user.
	Authorization string
}

// Options tune a test server; zero values take the protocol defaults.
type Options struct {
	Group            assign.Config
	AutoCreateGroups bool
	Now              func() time.Time
	// Auth turns authentication on. Nil runs the server with it off (every
	// caller is an anonymous ADMIN), so that tests about other things need
	// no credentials.
	Auth *Auth
	// Gateway tunes the gateway (member auth, rate limits, metrics). Start
	// sets its Logger, Auth and Metrics.
	Gateway gateway.Options
	// Redis, when set, makes the coordinator provision shard streams and
	// prove drains against it (docs/protocol.md §7), with the three settings
	// below (zero: the coordinator's defaults).
	Redis                actors.StreamRedis
	ProducerRoutingLease time.Duration
	DrainCheckInterval   time.Duration
	RetireRemovedShards  bool
	// MaxHeldHeartbeats bounds the heartbeats held at once (zero: the
	// coordinator's default).
	MaxHeldHeartbeats int
	// ReferenceMetrics also exports the reference design's metric
	// families (--reference-metrics).
	ReferenceMetrics bool
	// MetricsInterval, when set, is the metrics collection's interval
	// (and its round's bound): the console's charts fill that fast.
	MetricsInterval time.Duration
}

// Auth configures authentication of a test server.
type Auth struct {
	// Users are the configured users; nil means [TestUsers].
	Users []auth.User
	// Secret signs tokens; nil means a random one. Pass the same secret to
	// a restarted server for its tokens to stay valid.
	Secret []byte
	// PreviousSecrets still verify tokens (rotation).
	PreviousSecrets [][]byte
	// TokenTTL is the token lifetime; 0 means the default.
	TokenTTL time.Duration
}

// Test users of [TestUsers]: one per role, password = name + "-pw".
const (
	UserReader  = "reader"
	UserWriter  = "writer"
	UserMember  = "member"
	UserAdmin   = "root"
	UserMonitor = "monitor"
)

// Password is the password of a test user.
func Password(user string) string { return user + "-pw" }

// TestUsers returns one user per role (see the User… constants), hashed at
// bcrypt's minimum cost so that tests stay fast.
func TestUsers(t testing.TB) []auth.User {
	t.Helper()
	var out []auth.User
	for _, u := range []struct {
		name  string
		roles auth.Roles
	}{
		{UserReader, auth.Read}, {UserWriter, auth.Write}, {UserMember, auth.Member},
		{UserAdmin, auth.Admin}, {UserMonitor, auth.Monitor},
	} {
		hash, err := auth.HashPassword(Password(u.name), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, auth.User{Username: u.name, PasswordHash: hash, Roles: u.roles})
	}
	return out
}

// Basic is the Authorization header value of Basic credentials.
func Basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// Start opens dir (a fresh t.TempDir() when empty) and serves it with
// the production server (package server) on a free loopback port. The
// server is stopped at the end of the test unless stopped before.
func Start(t testing.TB, dir string, opts Options) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A fuzz target's server stays quiet: its log lines would go through
	// f.Log from inside the fuzz function, which the testing package
	// forbids (it panics), and the inputs are far too many to log anyway.
	if _, fuzzing := t.(*testing.F); testing.Verbose() && !fuzzing {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Logger, cfg.Now = "127.0.0.1:0", dir, log, opts.Now
	cfg.Group = opts.Group.EnsureDefaults()
	cfg.AutoCreateGroups, cfg.ReferenceMetrics = opts.AutoCreateGroups, opts.ReferenceMetrics
	cfg.Auth = false
	if opts.Auth != nil {
		cfg.Authenticator = newAuthenticator(t, dir, opts.Auth)
	}
	gw := opts.Gateway
	if gw.BodyMemory == 0 {
		gw.BodyMemory = cfg.Gateway.BodyMemory
	}
	cfg.Gateway, cfg.AnyHost = gw, true // LocalHostsOnly only when a test asks
	cfg.StreamRedis, cfg.RetireRemovedShards, cfg.MaxHeldHeartbeats = opts.Redis, opts.RetireRemovedShards, opts.MaxHeldHeartbeats
	if opts.ProducerRoutingLease > 0 {
		cfg.ProducerRoutingLease = opts.ProducerRoutingLease
	}
	if opts.DrainCheckInterval > 0 {
		cfg.DrainCheckInterval = opts.DrainCheckInterval
	}
	if opts.MetricsInterval > 0 {
		cfg.MetricsInterval, cfg.MetricsTimeout = opts.MetricsInterval, opts.MetricsInterval
	}
	srv, err := server.Open(context.Background(), cfg)
	if err != nil {
		if cfg.Authenticator != nil {
			cfg.Authenticator.Close()
		}
		t.Fatalf("start coordinator: %v", err)
	}
	store, _ := srv.Store().(*persistence.PebbleStore)
	s := &Server{t: t, Dir: dir, Store: store, Coord: srv.Coordinator(), Server: srv, URL: srv.URL(),
		Auth: srv.Authenticator(), Metrics: srv.Metrics()}
	if opts.Auth != nil {
		s.Authorization = Basic(UserAdmin, Password(UserAdmin))
	}
	t.Cleanup(s.Stop)
	return s
}

func newAuthenticator(t testing.TB, dir string, a *Auth) *auth.Authenticator {
	t.Helper()
	users, secret := a.Users, a.Secret
	if users == nil {
		users = TestUsers(t)
	}
	if secret == nil {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			t.Fatal(err)
		}
	}
	revocations, err := auth.OpenRevocations(dir, 0, nil)
	if err != nil {
		t.Fatalf("revocations: %v", err)
	}
	authn, err := auth.New(auth.Config{Users: users, Secret: secret, PreviousSecrets: a.PreviousSecrets,
		TokenTTL: a.TokenTTL, Revocations: revocations})
	if err != nil {
		t.Fatalf("authenticator: %v", err)
	}
	return authn
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// Stop shuts the server down in production order; calling it twice is fine.
func (s *Server) Stop() {
	if s.Server == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Server.Close(ctx); err != nil {
		s.t.Errorf("stop coordinator: %v", err)
	}
	s.Server = nil
}

// Handler is the running server's HTTP handler (the gateway's), for
// benchmarks that skip the network.
func (s *Server) Handler() http.Handler { return s.Server.Handler() }

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
	if s.Authorization != "" {
		req.Header.Set("Authorization", s.Authorization)
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
	s.JSON(http.MethodPost, coordclient.StreamPath(prefix),
		protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: "test"}, http.StatusCreated, nil)
}

// Heartbeat posts req for its member and returns the decoded answer, which
// must be a 200.
func (s *Server) Heartbeat(prefix, group string, req protocol.HeartbeatRequest) protocol.HeartbeatResponse {
	s.t.Helper()
	var resp protocol.HeartbeatResponse
	s.JSON(http.MethodPost, coordclient.HeartbeatPath(prefix, group, req.MemberID), req, http.StatusOK, &resp)
	return resp
}

// nullable lists the response fields that may be JSON null: objects and
// times that are absent. No array is among them.
var nullable = map[string]bool{
	"activeMigration": true, "lastHeartbeatAt": true, "memberLeaseExpiresAt": true,
	"rebalanceDeadlineAt": true, "activeReshardingId": true, "ackedAt": true,
	"next":       true, // the audit page's cursor
	"lag":        true, // shards and offsets: Redis cannot always tell
	"nextCursor": true, // messages: the last page
	// The reference design's monitoring fields: unknown ids, rates,
	// memory, Redis Cluster nodes and release versions.
	"redisNodeEndpoint": true, "redisNodeId": true, "redisSlotRangeStart": true, "redisSlotRangeEnd": true,
	"firstRecordId": true, "lastRecordId": true, "lastGeneratedId": true, "groupLastDeliveredId": true,
	"consumerLastDeliveredId": true, "consumerLastAckedId": true, "producedPerSecond": true, "consumedPerSecond": true,
	"memoryUsageBytes": true, "totalLag": true, "payload": true, "recordTimestampMs": true, "recordTime": true,
	"pageNextCursor": true, "deprecatedIn": true, "removedIn": true,
	// history: rates unknown at a first sample, after a gap or a trim
	"appendsPerSecond": true, "acksPerSecond": true,
	"lastDecision": true, // autoscale: no decision yet
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
// binary, say): only its URL is known, and Stop does nothing. Set
// Authorization for a server with authentication on.
func Remote(t testing.TB, url string) *Server {
	return &Server{t: t, URL: url}
}

// As returns a handle on the same server that sends authorization instead
// (an empty string sends none). Stopping it stops nothing.
func (s *Server) As(authorization string) *Server {
	return &Server{t: s.t, Dir: s.Dir, Store: s.Store, Coord: s.Coord, URL: s.URL, Auth: s.Auth,
		Metrics: s.Metrics, Authorization: authorization}
}
