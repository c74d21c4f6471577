package coordclient

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// behaviour is how a fake replica answers one request; body is the
// request's body.
type behaviour func(f *fakeReplica, w http.ResponseWriter, r *http.Request, body []byte)

// fakeReplica is a coordinator replica for the failover tests: it answers
// as its current behaviour says, counts the requests it saw and hands
// their bodies to seen.
type fakeReplica struct {
	srv    *httptest.Server
	hits   atomic.Int32
	seen   chan []byte
	behave atomic.Pointer[behaviour]
	// release ends every frozen request; closed in the test's cleanup.
	release chan struct{}
	// gaveUp gets a value each time a frozen request ends because the
	// client gave it up (its context ended).
	gaveUp chan struct{}
}

func newFakeReplica(t *testing.T, b behaviour) *fakeReplica {
	t.Helper()
	f := &fakeReplica{seen: make(chan []byte, 64), release: make(chan struct{}), gaveUp: make(chan struct{}, 64)}
	f.set(b)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		f.seen <- body
		(*f.behave.Load())(f, w, r, body)
	}))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.release) })
	return f
}

func (f *fakeReplica) set(b behaviour) { f.behave.Store(&b) }

func (f *fakeReplica) URL() string { return f.srv.URL }

// next is the body of the next request the replica saw.
func (f *fakeReplica) next(t *testing.T) protocol.HeartbeatRequest {
	t.Helper()
	var req protocol.HeartbeatRequest
	if err := json.Unmarshal(<-f.seen, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// answerOK answers a heartbeat OK (echoing its requestId and carrying
// memberLeaseMs 6000), any other request {}; hint, when not empty, is sent
// as the owner hint.
func answerOK(hint string) behaviour {
	return func(_ *fakeReplica, w http.ResponseWriter, r *http.Request, body []byte) {
		if hint != "" {
			w.Header().Set(protocol.OwnerURLHeader, hint)
		}
		w.Header().Set("Content-Type", "application/json")
		var req protocol.HeartbeatRequest
		if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil || req.MemberID == "" {
			_, _ = w.Write([]byte(`{}`))
			return
		}
		_ = json.NewEncoder(w).Encode(protocol.HeartbeatResponse{ResponseTo: req.RequestID, Status: protocol.StatusOK,
			MemberID: req.MemberID, MemberEpoch: req.MemberEpoch + 1, HeartbeatIntervalMs: 1000, RebalanceTimeoutMs: 1000,
			MemberLeaseMs: 6000})
	}
}

// answerRetry answers a heartbeat RETRY carrying code ("" for none).
func answerRetry(code protocol.ErrorCode) behaviour {
	return func(_ *fakeReplica, w http.ResponseWriter, _ *http.Request, body []byte) {
		var req protocol.HeartbeatRequest
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(protocol.HeartbeatResponse{ResponseTo: req.RequestID, Status: protocol.StatusRetry,
			MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, HeartbeatIntervalMs: 1000, RebalanceTimeoutMs: 1000,
			ErrorCode: code})
	}
}

// answerStatus answers status with a §3 body of code.
func answerStatus(status int, code protocol.ErrorCode) behaviour {
	return func(_ *fakeReplica, w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(protocol.NewErrorBody(code, "not here"))
	}
}

// freeze holds the request unanswered, as a stopped process does, until
// the client gives it up (reported on gaveUp) or the test ends.
func freeze(f *fakeReplica, _ http.ResponseWriter, r *http.Request, _ []byte) {
	select {
	case <-r.Context().Done():
		f.gaveUp <- struct{}{}
	case <-f.release:
	}
}

// resetConn breaks the connection with a TCP reset, after the request
// arrived and before any answer.
func resetConn(_ *fakeReplica, w http.ResponseWriter, _ *http.Request, _ []byte) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// holdThenOK answers OK after hold, as a coordinator holding a heartbeat
// (waitMs) that has no news does, or at once when the client gives up.
func holdThenOK(hold time.Duration) behaviour {
	return func(f *fakeReplica, w http.ResponseWriter, r *http.Request, body []byte) {
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-t.C:
			answerOK("")(f, w, r, body)
		case <-r.Context().Done():
			f.gaveUp <- struct{}{}
		}
	}
}

// fakeClock is a clock tests move by hand (Client.now).
type fakeClock struct{ at atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.at.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.at.Add(int64(d)) }

// hb is a heartbeat request of member m0 numbered seq.
func hb(seq int64, waitMs int64) *protocol.HeartbeatRequest {
	return &protocol.HeartbeatRequest{ProtocolVersion: 1, RequestID: "m0-req-" + string(rune('a'+seq%26)), MemberID: "m0",
		InstanceID: "inst-1", RequestSeq: seq, MemberEpoch: 3, WaitMs: waitMs,
		RuntimeConsumerCapacity: protocol.ConsumerCapacity{RuntimeMaxConcurrency: 1, AvailableConcurrency: 1}}
}
