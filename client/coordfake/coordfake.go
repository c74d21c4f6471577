// Package coordfake is an in-process fake of the rscoord coordinator for
// the tests of applications written against package member and package
// producer, as franz-go's kfake is for Kafka clients: it speaks the
// coordinator's HTTP protocol (package protocol's types) on a loopback
// port, holds one or more streams and consumer groups in memory, and lets
// a test script what the coordinator decides: explicit assignments, which
// revoke shards from members and grant them to others, fences and
// RETRY answers. Pair it with package redistest for Redis.
//
//	fake, err := coordfake.New(coordfake.WithStream("orders", 4))
//	…
//	defer fake.Close()
//	rt, err := member.New(handle, member.WithCoordinator(fake.URL()),
//		member.WithStream("orders"), member.WithRedis(rdb),
//		member.WithMemberLease(fake.MemberLease()))
//
// It keeps the coordinator's first promise: a shard is granted to a member
// only once its previous holder reported it REVOKED, left, was fenced or
// let its lease lapse. It is a test aid, not the coordinator: nothing is
// durable, there is no authentication, no resharding, no held answers
// (waitMs is ignored: answers come at once) and no incarnation checks (a
// join with a member id the fake knows frees that member's shards at
// once). rscoord's own tests use the real coordinator.
package coordfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Opt configures a fake coordinator.
type Opt func(*Server)

// WithStream registers stream prefix with shards shards and its default
// consumer group (named like the prefix). Groups are also registered on
// the fly by the first heartbeat naming one.
func WithStream(prefix string, shards int) Opt {
	return func(s *Server) { s.addStream(prefix, shards) }
}

// WithTiming sets the heartbeat interval, member lease and rebalance
// timeout the fake answers with. Defaults: 100ms, 2s and 10s, short so
// that tests run fast. Members must use the same lease
// (member.WithMemberLease).
func WithTiming(interval, lease, rebalance time.Duration) Opt {
	return func(s *Server) { s.interval, s.lease, s.rebalance = interval, lease, rebalance }
}

// Server is a running fake coordinator. Its methods may be called from any
// goroutine.
type Server struct {
	interval, lease, rebalance time.Duration

	ln   net.Listener
	http *http.Server
	done chan struct{}

	mu      sync.Mutex
	streams map[string]int               // prefix → shard count
	groups  map[groupKey]*group          // registered groups
	answers map[string]protocol.Status   // scripted next answer per member
	retry   bool                         // answer RETRY to everything
	seen    map[groupKey]map[string]bool // members ever seen, for Members
}

type groupKey struct{ prefix, group string }

// New starts a fake coordinator on a loopback port.
func New(opts ...Opt) (*Server, error) {
	s := &Server{
		interval: 100 * time.Millisecond, lease: 2 * time.Second, rebalance: 10 * time.Second,
		streams: map[string]int{}, groups: map[groupKey]*group{}, answers: map[string]protocol.Status{},
		seen: map[groupKey]map[string]bool{}, done: make(chan struct{}),
	}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if s.interval <= 0 || s.lease <= 0 || s.rebalance <= 0 {
		return nil, errors.New("coordfake: WithTiming needs positive durations")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("coordfake: listen: %w", err)
	}
	mux := http.NewServeMux()
	base := protocol.BasePath + "/streams/{prefix}/groups/{group}"
	mux.HandleFunc("POST "+base+"/members/{member}/heartbeat", s.heartbeat)
	mux.HandleFunc("GET "+base+"/producer-routing", s.routing)
	s.ln, s.http = ln, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { // stopped by Close
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// URL is the fake's base URL, for member.WithCoordinator and
// producer.WithCoordinator.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// MemberLease is the member lease the fake answers with.
func (s *Server) MemberLease() time.Duration { return s.lease }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	<-s.done
	return err
}

// AddStream registers a stream (see WithStream) while the fake runs.
func (s *Server) AddStream(prefix string, shards int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addStream(prefix, shards)
}

func (s *Server) addStream(prefix string, shards int) {
	s.streams[prefix] = shards
	k := groupKey{prefix, prefix}
	if s.groups[k] == nil {
		s.groups[k] = newGroup(shards)
	}
}

// Assign scripts the assignment of a group: member id → the shards it
// should own; shards named for nobody stay unowned. Members own their
// shards once the previous holders let go, as with the real coordinator:
// a shard taken from a member is revoked, and granted to the new one only
// after the old one reported it REVOKED. A nil map returns to the fake's
// own balancing (shards spread evenly over the members, by member id).
func (s *Server) Assign(prefix, group string, assignment map[string][]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groupLocked(prefix, group)
	if g == nil {
		return
	}
	g.scripted = nil
	if assignment != nil {
		g.scripted = map[int]string{}
		for m, shards := range assignment {
			for _, sh := range shards {
				g.scripted[sh] = m
			}
		}
	}
	g.metadata++
}

// Fence makes the next heartbeat of memberID (in any group) be answered
// FENCED_MEMBER_EPOCH, as after the coordinator expired it: the member
// stops reading at once and rejoins. Its shards are freed when it is
// answered.
func (s *Server) Fence(memberID string) { s.script(memberID, protocol.StatusFencedMemberEpoch) }

// Forget makes the next heartbeat of memberID be answered
// UNKNOWN_MEMBER_ID, as after the coordinator lost it.
func (s *Server) Forget(memberID string) { s.script(memberID, protocol.StatusUnknownMemberID) }

func (s *Server) script(memberID string, st protocol.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[memberID] = st
}

// SetRetry makes the fake answer RETRY to every heartbeat while on, as a
// coordinator that cannot decide (its store down) does: members keep their
// shards until their leases lapse.
func (s *Server) SetRetry(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retry = on
}

// Holders is who holds each shard of a group now (granted and not let go),
// shard → member id; unheld shards are absent.
func (s *Server) Holders(prefix, group string) map[int]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]string{}
	if g := s.groupLocked(prefix, group); g != nil {
		g.expire(time.Now(), s.lease)
		for sh, h := range g.holder {
			if h != "" {
				out[sh] = h
			}
		}
	}
	return out
}

// Members are the ids of the live members of a group, sorted.
func (s *Server) Members(prefix, group string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groupLocked(prefix, group)
	if g == nil {
		return nil
	}
	g.expire(time.Now(), s.lease)
	return g.memberIDs()
}

func (s *Server) groupLocked(prefix, group string) *group {
	k := groupKey{prefix, group}
	if g := s.groups[k]; g != nil {
		return g
	}
	shards, ok := s.streams[prefix]
	if !ok {
		return nil
	}
	g := newGroup(shards)
	s.groups[k] = g
	return g
}

func (s *Server) routing(w http.ResponseWriter, r *http.Request) {
	prefix, group := r.PathValue("prefix"), r.PathValue("group")
	s.mu.Lock()
	g := s.groupLocked(prefix, group)
	var resp protocol.ProducerRoutingResponse
	if g != nil {
		resp = protocol.NewProducerRouting(prefix, group, g.shards, g.metadata)
	}
	s.mu.Unlock()
	if g == nil {
		writeError(w, protocol.CodeStreamNotFound, fmt.Sprintf("stream %q does not exist", prefix))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req protocol.HeartbeatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, protocol.CodeInvalidRequest, "body: "+err.Error())
		return
	}
	prefix, group, id := r.PathValue("prefix"), r.PathValue("group"), r.PathValue("member")
	resp := protocol.HeartbeatResponse{
		ResponseTo: req.RequestID, MemberID: id, MemberEpoch: req.MemberEpoch,
		HeartbeatIntervalMs: s.interval.Milliseconds(), RebalanceTimeoutMs: s.rebalance.Milliseconds(),
		MemberLeaseMs: s.lease.Milliseconds(), Assignment: protocol.EmptyAssignment(0),
	}
	switch {
	case !protocol.SupportsVersion(req.ProtocolVersion):
		resp.Status = protocol.StatusUnsupportedProtocol
		writeJSON(w, http.StatusOK, resp)
		return
	case req.RequestID == "" || req.MemberID != id:
		resp.Status, resp.ErrorCode = protocol.StatusInvalidRequest, protocol.CodeInvalidRequest
		resp.Message = "requestId must be set and memberId must equal the path's"
		writeJSON(w, http.StatusOK, resp)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groupLocked(prefix, group)
	switch {
	case g == nil:
		resp.Status, resp.ErrorCode = protocol.StatusUnknownMemberID, protocol.CodeStreamNotFound
		resp.Message = fmt.Sprintf("stream %q does not exist", prefix)
	case s.retry:
		resp.Status = protocol.StatusRetry
	default:
		g.expire(time.Now(), s.lease)
		if st, ok := s.answers[id]; ok && req.MemberEpoch != protocol.EpochJoin {
			delete(s.answers, id)
			g.drop(id)
			resp.Status = st
			break
		}
		g.apply(&req, &resp, time.Now())
	}
	writeJSON(w, http.StatusOK, resp)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code protocol.ErrorCode, msg string) {
	writeJSON(w, code.HTTPStatus(), protocol.NewErrorBody(code, msg))
}
