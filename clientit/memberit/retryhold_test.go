package memberit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
)

// TestNoHeldHeartbeatAfterRetry: while ownership of the coordinator moves
// (cluster mode), heartbeats are answered RETRY, which renews no lease.
// The member must not ask for a held answer again until an answer renewed
// its lease: the new owner's first answer must come at once, not a
// heartbeat interval later with the lease running out. Once renewed, the
// steady member's heartbeats are held again.
func TestNoHeldHeartbeatAfterRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "retryhold", 1)
	target, err := url.Parse(e.coord.URL)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	type seen struct {
		waitMs   int64
		answered string // "retry" or "forwarded"
	}
	var (
		mu       sync.Mutex
		requests []seen
		retrying atomic.Bool
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req protocol.HeartbeatRequest
		_ = json.Unmarshal(body, &req)
		s := seen{waitMs: req.WaitMs, answered: "forwarded"}
		if retrying.Load() {
			s.answered = "retry"
		}
		mu.Lock()
		requests = append(requests, s)
		mu.Unlock()
		if s.answered == "retry" { // what a stand-by answers while no owner can be reached
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(assign.RetryResponse(&req, testGroupConfig()))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		forward.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	snapshot := func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), requests...)
	}
	r := e.start("rs-retry", func(ctx context.Context, m *member.Message) error { return m.Ack(ctx) },
		member.WithCoordinator(proxy.URL))
	heldSince := func(from int) bool {
		for _, s := range snapshot()[from:] {
			if s.answered == "forwarded" && s.waitMs > 0 {
				return true
			}
		}
		return false
	}
	eventually(t, 10*time.Second, "a steady, held heartbeat", func() bool { return heldSince(0) })

	retrying.Store(true)
	start := len(snapshot())
	eventually(t, 10*time.Second, "three RETRY answers", func() bool {
		n := 0
		for _, s := range snapshot()[start:] {
			if s.answered == "retry" {
				n++
			}
		}
		return n >= 3
	})
	retrying.Store(false)
	back := len(snapshot())
	eventually(t, 10*time.Second, "held heartbeats again after an OK", func() bool { return heldSince(back) })

	all := snapshot()
	// The first RETRY may answer a heartbeat sent while steady (held);
	// every later one, and the first forwarded after them, follows a RETRY.
	firstRetry := -1
	for i := start; i < len(all); i++ {
		if all[i].answered == "retry" {
			firstRetry = i
			break
		}
	}
	for i := firstRetry + 1; i < len(all); i++ {
		if all[i].waitMs > 0 {
			if all[i-1].answered == "retry" {
				t.Errorf("heartbeat %d after a RETRY asked to be held %d ms: %+v", i, all[i].waitMs, all[start:])
			}
		}
		if all[i].answered == "forwarded" {
			break
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
