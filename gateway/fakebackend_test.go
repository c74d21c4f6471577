package gateway_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/metrics"
)

// The coordinator is what the server gives the gateway.
var _ gateway.Backend = (*actors.Coordinator)(nil)

// fakeBackend is a gateway.Backend without actors or a store, for the
// tests of what the gateway itself does (routes, auth, limits, errors).
// It knows streams and groups by name, each group named like its stream
// unless added, and answers as a healthy coordinator without Redis:
// heartbeats OK with an empty assignment, creates of what exists 409,
// unknown groups and migrations 404, Redis reads 503. Audit entries are
// kept in memory. Set heartbeat or ready to answer otherwise.
type fakeBackend struct {
	cfg assign.Config

	mu      sync.Mutex
	streams map[string]bool
	groups  map[string]bool // "prefix/group"
	audit   []protocol.AuditEntry
	// heartbeats counts the heartbeats that reached the backend.
	heartbeats int
	// heartbeat, when set, answers heartbeats instead.
	heartbeat func(ctx context.Context, prefix, group, member string, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse
	// ready is Ready's answer.
	ready error
	// autoCreate registers an unknown group of a known stream on producer
	// routing when the gateway says the caller may.
	autoCreate bool
}

// newFake is a fake holding the streams prefixes, each with its default
// group.
func newFake(prefixes ...string) *fakeBackend {
	f := &fakeBackend{cfg: assign.Config{}.EnsureDefaults(), streams: map[string]bool{}, groups: map[string]bool{}}
	for _, p := range prefixes {
		f.streams[p], f.groups[p+"/"+p] = true, true
	}
	return f
}

// fakeOptions tune a fake-backed server.
type fakeOptions struct {
	// Auth turns authentication on with coordtest.TestUsers (Basic
	// credentials of the ADMIN user become the server's Authorization).
	Auth bool
	// Secret signs tokens; nil means a random one.
	Secret []byte
	// Gateway tunes the gateway; Logger, Auth and Metrics are set.
	Gateway gateway.Options
}

// serveFake serves the gateway over f on real HTTP, stopped at the end of
// the test. The handle's helpers (Do, JSON, Heartbeat) work as on a
// coordtest server.
func serveFake(t testing.TB, f *fakeBackend, opts fakeOptions) *coordtest.Server {
	t.Helper()
	var authn *auth.Authenticator
	if opts.Auth {
		secret := opts.Secret
		if secret == nil {
			secret = make([]byte, 32)
			if _, err := rand.Read(secret); err != nil {
				t.Fatal(err)
			}
		}
		revocations, err := auth.OpenRevocations(t.TempDir(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		authn, err = auth.New(auth.Config{Users: coordtest.TestUsers(t), Secret: secret, Revocations: revocations})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = authn.Close() })
	}
	gw := opts.Gateway
	gw.Logger, gw.Auth, gw.Metrics = slog.New(slog.DiscardHandler), authn, metrics.New()
	srv := httptest.NewServer(gateway.New(f, gw))
	t.Cleanup(srv.Close)
	s := coordtest.Remote(t, srv.URL)
	s.Auth, s.Metrics = authn, gw.Metrics
	if authn != nil {
		s.Authorization = coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	}
	return s
}

func (f *fakeBackend) known(prefix, group string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.streams[prefix] {
		return protocol.Errorf(protocol.CodeStreamNotFound, fmt.Sprintf("stream %q does not exist", prefix))
	}
	if group != "" && !f.groups[prefix+"/"+group] {
		return protocol.Errorf(protocol.CodeGroupNotFound, fmt.Sprintf("group %q of stream %q does not exist", group, prefix))
	}
	return nil
}

func (f *fakeBackend) summary(prefix, group string) protocol.GroupResponse {
	return protocol.GroupResponse{StreamPrefix: prefix, ConsumerGroup: group, ShardCount: 4, MetadataVersion: 1,
		State: protocol.GroupEmpty, TargetAssignmentSummary: map[string]int{}, CurrentAssignmentSummary: map[string]int{}}
}

func (f *fakeBackend) Heartbeat(ctx context.Context, prefix, group, member string, req *protocol.HeartbeatRequest) protocol.HeartbeatResponse {
	f.mu.Lock()
	f.heartbeats++
	answer := f.heartbeat
	f.mu.Unlock()
	if answer != nil {
		return answer(ctx, prefix, group, member, req)
	}
	if r := assign.Validate(req, member); r.Refused() {
		return r.Answer(req, f.cfg)
	}
	if err := f.known(prefix, group); err != nil {
		return assign.Unknown(protocol.CodeGroupNotFound, err.Error()).Answer(req, f.cfg)
	}
	resp := assign.Retry().Answer(req, f.cfg)
	resp.Status, resp.MemberEpoch, resp.Assignment = protocol.StatusOK, 1, protocol.EmptyAssignment(1)
	return resp
}

func (f *fakeBackend) HeartbeatBudget(req *protocol.HeartbeatRequest) time.Duration {
	return 5*time.Second + actors.MaxHold(req, f.cfg)
}

func (f *fakeBackend) GroupConfig() assign.Config { return f.cfg }

func (f *fakeBackend) CreateStream(_ context.Context, prefix string, req protocol.CreateRequest) (protocol.StreamResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.streams[prefix] {
		return protocol.StreamResponse{}, protocol.Errorf(protocol.CodeStreamPrefixAlreadyExists, fmt.Sprintf("stream %q already exists", prefix))
	}
	f.streams[prefix], f.groups[prefix+"/"+prefix] = true, true
	return protocol.StreamResponse{StreamPrefix: prefix, ShardCount: 4, MetadataVersion: 1}, nil
}

func (f *fakeBackend) CreateGroup(_ context.Context, prefix, group string, req protocol.CreateRequest) (protocol.GroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups[prefix+"/"+group] {
		return protocol.GroupResponse{}, protocol.Errorf(protocol.CodeGroupAlreadyExists, fmt.Sprintf("group %q already exists", group))
	}
	f.streams[prefix], f.groups[prefix+"/"+group] = true, true
	return f.summary(prefix, group), nil
}

func (f *fakeBackend) DeleteGroup(_ context.Context, prefix, group string, req protocol.DeleteGroupRequest) (protocol.GroupResponse, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.GroupResponse{}, err
	}
	f.mu.Lock()
	delete(f.groups, prefix+"/"+group)
	f.mu.Unlock()
	return f.summary(prefix, group), nil
}

func (f *fakeBackend) DeleteStream(_ context.Context, prefix string, _ protocol.DeleteStreamRequest) (protocol.DeleteStreamResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.streams[prefix] {
		return protocol.DeleteStreamResponse{}, protocol.Errorf(protocol.CodeStreamNotFound, "no stream "+prefix)
	}
	delete(f.streams, prefix)
	return protocol.DeleteStreamResponse{StreamPrefix: prefix, DeletedGroups: []string{}, DeletedKeys: []string{}}, nil
}

func (f *fakeBackend) Scale(_ context.Context, prefix string, req protocol.ScaleRequest) (protocol.ScaleResponse, error) {
	if err := f.known(prefix, ""); err != nil {
		return protocol.ScaleResponse{}, err
	}
	if req.TargetShardCount == nil {
		return protocol.ScaleResponse{}, protocol.Errorf(protocol.CodeInvalidRequest, "targetShardCount is required")
	}
	return protocol.ScaleResponse{StreamPrefix: prefix, TargetShardCount: *req.TargetShardCount,
		AffectedConsumerGroups: []string{prefix}, Migrations: []protocol.Migration{{ReshardingID: "rs-1",
			FromShardCount: 4, ToShardCount: *req.TargetShardCount, State: protocol.MigrationPreparing}}}, nil
}

func migrationNotFound(prefix, id string) error {
	return protocol.Errorf(protocol.CodeMigrationNotFound, fmt.Sprintf("stream %q has no migration %q", prefix, id))
}

func (f *fakeBackend) Rollback(_ context.Context, prefix, group, id string, _ protocol.OperatorRequest) (protocol.Migration, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.Migration{}, err
	}
	return protocol.Migration{}, migrationNotFound(prefix, id)
}

func (f *fakeBackend) ResetOffsets(_ context.Context, prefix, group string, req protocol.OffsetsResetRequest) (protocol.OffsetsResetResponse, error) {
	return protocol.OffsetsResetResponse{StreamPrefix: prefix, ConsumerGroup: group, To: req.To, Shards: []protocol.OffsetReset{}, HandedOff: []string{}}, nil
}

func (f *fakeBackend) Complete(_ context.Context, prefix, id string, _ protocol.OperatorRequest) (protocol.Migration, error) {
	if err := f.known(prefix, ""); err != nil {
		return protocol.Migration{}, err
	}
	return protocol.Migration{}, migrationNotFound(prefix, id)
}

func (f *fakeBackend) RecordAudit(_ context.Context, e protocol.AuditEntry) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.ID = strconv.Itoa(len(f.audit) + 1)
	f.audit = append(f.audit, e)
	return e.ID, nil
}

// Audit pages the entries newest first, without cursors.
func (f *fakeBackend) Audit(_ context.Context, prefix, _ string, limit int) (protocol.AuditPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	page := protocol.AuditPage{Entries: []protocol.AuditEntry{}}
	for i := len(f.audit) - 1; i >= 0 && (limit == 0 || len(page.Entries) < limit); i-- {
		if prefix == "" || f.audit[i].StreamPrefix == prefix {
			page.Entries = append(page.Entries, f.audit[i])
		}
	}
	return page, nil
}

// entries is a copy of the audit log, oldest first.
func (f *fakeBackend) entries() []protocol.AuditEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.AuditEntry(nil), f.audit...)
}

// heartbeatsSeen is how many heartbeats reached the backend.
func (f *fakeBackend) heartbeatsSeen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats
}

func (f *fakeBackend) Health(context.Context) protocol.Health {
	up := protocol.ComponentHealth{Status: protocol.HealthUp}
	return protocol.Health{Status: protocol.HealthUp, CoordinatorID: "fake", LoopDetail: up, Store: up, Loop: protocol.HealthUp,
		RedisDetail: protocol.ComponentHealth{Status: protocol.HealthNotConfigured}, Redis: protocol.HealthNotConfigured}
}

func (f *fakeBackend) Ready(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *fakeBackend) Groups(context.Context) (protocol.GroupsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := protocol.GroupsResponse{Groups: []protocol.GroupResponse{}}
	for key := range f.groups {
		for i := range key {
			if key[i] == '/' {
				out.Groups = append(out.Groups, f.summary(key[:i], key[i+1:]))
				break
			}
		}
	}
	return out, nil
}

func (f *fakeBackend) Group(_ context.Context, prefix, group string) (protocol.GroupResponse, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.GroupResponse{}, err
	}
	return f.summary(prefix, group), nil
}

func (f *fakeBackend) Members(_ context.Context, prefix, group string) (protocol.MembersResponse, error) {
	return protocol.MembersResponse{Members: []protocol.Member{}}, f.known(prefix, group)
}

func (f *fakeBackend) Assignments(_ context.Context, prefix, group string) (protocol.AssignmentsResponse, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.AssignmentsResponse{}, err
	}
	return protocol.AssignmentsResponse{TargetAssignment: map[string][]protocol.Shard{},
		CurrentAssignments: map[string][]protocol.Shard{}, RevokeProgress: map[string][]protocol.Shard{},
		InvariantViolations: []string{}, OwnerEpochs: []protocol.Shard{}}, nil
}

func (f *fakeBackend) Consumption(_ context.Context, prefix, group string) (protocol.ConsumptionResponse, error) {
	return protocol.ConsumptionResponse{Progress: []protocol.ConsumptionRow{}}, f.known(prefix, group)
}

func (f *fakeBackend) Migrations(_ context.Context, prefix, group string) (protocol.MigrationsResponse, error) {
	return protocol.MigrationsResponse{Migrations: []protocol.Migration{}}, f.known(prefix, group)
}

func (f *fakeBackend) Migration(_ context.Context, prefix, group, id string) (protocol.Migration, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.Migration{}, err
	}
	return protocol.Migration{}, migrationNotFound(prefix, id)
}

func (f *fakeBackend) ProducerRouting(_ context.Context, prefix, group string, mayRegister bool) (protocol.ProducerRoutingResponse, error) {
	f.mu.Lock()
	if f.autoCreate && mayRegister && f.streams[prefix] {
		f.groups[prefix+"/"+group] = true
	}
	f.mu.Unlock()
	if err := f.known(prefix, group); err != nil {
		return protocol.ProducerRoutingResponse{}, err
	}
	return protocol.NewProducerRouting(prefix, group, 4, 1), nil
}

func noRedis() error {
	return protocol.Errorf(protocol.CodeRedisNotConfigured, "the fake runs without Redis")
}

func (f *fakeBackend) Shards(_ context.Context, prefix, group string) (protocol.ShardsResponse, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.ShardsResponse{}, err
	}
	return protocol.ShardsResponse{}, noRedis()
}

func (f *fakeBackend) Offsets(_ context.Context, prefix, group string) (protocol.OffsetsResponse, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.OffsetsResponse{}, err
	}
	return protocol.OffsetsResponse{}, noRedis()
}

func (f *fakeBackend) Messages(_ context.Context, prefix, group string, _ int, _ string, _ int, _ string) (protocol.MessagesResponse, error) {
	if err := f.known(prefix, group); err != nil {
		return protocol.MessagesResponse{}, err
	}
	return protocol.MessagesResponse{}, noRedis()
}

func (f *fakeBackend) HeldHeartbeats() int64  { return 0 }
func (f *fakeBackend) MaxHeldHeartbeats() int { return 1000 }
