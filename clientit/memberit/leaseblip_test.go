package memberit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/poll"
)

// unheldTransport asks the coordinator to answer every heartbeat at once
// (waitMs 0): the member then paces its heartbeats itself, an interval
// apart, and an answer it applies late still renews its lease well past
// the time it is applied.
type unheldTransport struct{}

func (unheldTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/heartbeat") {
		return http.DefaultTransport.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var hb map[string]any
	if err := json.Unmarshal(body, &hb); err != nil {
		return nil, err
	}
	hb["waitMs"] = 0
	if body, err = json.Marshal(hb); err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return http.DefaultTransport.RoundTrip(req)
}

// TestLeaseLapseRenewedLateRereadsAtOnce: a lease that lapses and is then
// renewed by an answer the member applies late (here: an OnHeartbeat hook
// that runs past the lease on the member's actor, so that the answer is
// applied before the member's own lease check) is still a lapse. An Ack
// made during the lapse is refused, so its record stays in the member's
// pending list; the member stops and reads again from its own pending
// entries as soon as the late answer confirms the shard, instead of
// leaving the record for XAUTOCLAIM a claim min idle (30s) later.
func TestLeaseLapseRenewedLateRereadsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "blip", 1)

	var armed atomic.Bool
	var prevSent time.Time // hooks never run concurrently
	lapsed := make(chan struct{})
	tried := make(chan struct{})
	var ackErr error
	hooks := member.Hooks{OnHeartbeat: func(_ context.Context, ev member.HeartbeatEvent) {
		now := time.Now()
		if ev.Err != nil || ev.Status == string(protocol.StatusRetry) {
			return
		}
		sent := now.Add(-ev.Latency)
		defer func() { prevSent = sent }()
		// The member's lease runs until prevSent + lease; this answer,
		// once applied, renews it until sent + lease. Holding the answer
		// to the middle of that window makes the lease lapse and then be
		// renewed by an answer applied after the lapse.
		if !armed.Load() || prevSent.IsZero() || sent.Sub(prevSent) < 100*time.Millisecond {
			return
		}
		end := prevSent.Add(testLease)
		if now.After(end) {
			return
		}
		armed.Store(false)
		// Hold the answer until the lease has lapsed.
		poll.Hold(context.Background(), time.Until(end.Add(30*time.Millisecond)))
		close(lapsed)
		select {
		case <-tried:
		case <-time.After(time.Until(sent.Add(testLease - 30*time.Millisecond))):
		}
	}}

	type delivery struct {
		at          time.Time
		redelivered bool
	}
	deliveries := make(chan delivery, 4)
	var calls atomic.Int32
	var tryOnce sync.Once
	r := e.start("rs-blip", func(ctx context.Context, m *member.Message) error {
		deliveries <- delivery{at: time.Now(), redelivered: m.Redelivered}
		if calls.Add(1) > 1 {
			return m.Ack(ctx)
		}
		select {
		case <-lapsed:
		case <-time.After(15 * time.Second):
		}
		ackErr = m.Ack(ctx)
		tryOnce.Do(func() { close(tried) })
		return nil
	}, member.WithHooks(hooks), member.WithHTTPClient(&http.Client{Transport: unheldTransport{}}),
		member.WithClaimMinIdle(30*time.Second))

	eventually(t, 15*time.Second, "the member owns the shard", func() bool {
		return len(assignments(t, e.coord, e.prefix)["rs-blip-m0"]) == 1
	})
	e.publish(0, 1, "blip")
	select {
	case <-deliveries:
	case <-time.After(10 * time.Second):
		t.Fatal("the record never reached the handler")
	}
	armed.Store(true)
	select {
	case <-tried:
	case <-time.After(10 * time.Second):
		t.Fatal("the hook never held an answer past the lease")
	}
	triedAt := time.Now()
	if !errors.Is(ackErr, member.ErrLeaseExpired) {
		t.Fatalf("Ack while the lease had lapsed: %v, want ErrLeaseExpired (no lapse was produced)", ackErr)
	}
	select {
	case d := <-deliveries:
		if !d.redelivered {
			t.Fatalf("the record came back not marked redelivered")
		}
		if took := d.at.Sub(triedAt); took > 3*time.Second {
			t.Fatalf("the record left pending by the lapse came back %v after it; want it read again from the own pending list at once", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the record whose Ack the lapse refused was not read again within 5s (it waits for XAUTOCLAIM after 30s)")
	}
	eventually(t, 5*time.Second, "nothing pending", func() bool { return e.pending(0) == 0 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
