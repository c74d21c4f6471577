package memberit_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
)

// okSendTransport records when every heartbeat answered OK was sent.
type okSendTransport struct {
	hangingTransport
	mu    sync.Mutex
	sends []time.Time
}

func (o *okSendTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.hangingTransport.RoundTrip(req)
	o.hangingTransport.mu.Lock()
	last := o.hangingTransport.lastOK
	o.hangingTransport.mu.Unlock()
	o.mu.Lock()
	if n := len(o.sends); !last.IsZero() && (n == 0 || !o.sends[n-1].Equal(last)) {
		o.sends = append(o.sends, last)
	}
	o.mu.Unlock()
	return resp, err
}

// TestHandlerContextDeadlineIsTheLeaseEnd: with WithHandlerDeadline(true)
// a handler's context carries the member's lease end, as known when the record was handed over, as its
// deadline, so a handler can plan its work by ctx.Deadline(); the context
// ends then even though later heartbeats renew the lease (a deadline
// cannot move), and the record is not acknowledged for the handler.
func TestHandlerContextDeadlineIsTheLeaseEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "deadline", 1)
	tr := &okSendTransport{}
	type seen struct {
		handedAt, deadline, doneAt time.Time
		hasDeadline                bool
		err                        error
	}
	got := make(chan seen, 1)
	e.start("rs-deadline", func(ctx context.Context, m *member.Message) error {
		if m.Fields["eventId"] != "plan-0-0" || m.Redelivered {
			return nil
		}
		s := seen{handedAt: time.Now()}
		s.deadline, s.hasDeadline = ctx.Deadline()
		select {
		case <-ctx.Done():
			s.doneAt, s.err = time.Now(), ctx.Err()
		case <-time.After(2 * testLease):
		}
		got <- s
		return nil
	}, member.WithHTTPClient(&http.Client{Transport: tr}), member.WithHandlerDeadline(true))
	e.publish(0, 1, "plan")
	var s seen
	select {
	case s = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the record never reached the handler")
	}
	if !s.hasDeadline {
		t.Fatal("the handler's context has no deadline; want the member's lease end")
	}
	if !s.deadline.After(s.handedAt) || s.deadline.After(s.handedAt.Add(testLease)) {
		t.Fatalf("deadline %v after the hand-over; want within the lease, (0, %v]", s.deadline.Sub(s.handedAt), testLease)
	}
	// The deadline is the send of a heartbeat answered OK plus the lease:
	// the member stamps the send just before the transport sees it.
	tr.mu.Lock()
	sends := append([]time.Time(nil), tr.sends...)
	tr.mu.Unlock()
	matched := false
	for _, sent := range sends {
		if d := sent.Add(testLease).Sub(s.deadline); d >= 0 && d < 50*time.Millisecond {
			matched = true
		}
	}
	if !matched {
		t.Fatalf("deadline %v is no OK heartbeat's send plus the lease %v (sends %v)", s.deadline, testLease, sends)
	}
	// Heartbeats went on succeeding: the context ends at its deadline.
	if !errors.Is(s.err, context.DeadlineExceeded) {
		t.Fatalf("handler context ended with %v, want context.DeadlineExceeded at its deadline", s.err)
	}
	if late := s.doneAt.Sub(s.deadline); late < 0 || late > 300*time.Millisecond {
		t.Fatalf("handler context ended %v after its deadline", late)
	}
}

// TestHandlerDeadlineOff: by default a handler's context has no deadline, and it outlives the lease end known at the
// hand-over while heartbeats keep renewing the lease.
func TestHandlerDeadlineOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "nodeadline", 1)
	type seen struct {
		hasDeadline bool
		err         error
	}
	got := make(chan seen, 1)
	e.start("rs-nodeadline", func(ctx context.Context, m *member.Message) error {
		if m.Fields["eventId"] != "long-0-0" || m.Redelivered {
			return nil
		}
		var s seen
		_, s.hasDeadline = ctx.Deadline()
		select {
		case <-ctx.Done():
		case <-time.After(testLease + 500*time.Millisecond):
		}
		s.err = ctx.Err()
		got <- s
		return m.Ack(ctx)
	})
	e.publish(0, 1, "long")
	select {
	case s := <-got:
		if s.hasDeadline || s.err != nil {
			t.Fatalf("handler context: deadline %v, error after a lease of work %v; want neither", s.hasDeadline, s.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the record never reached the handler")
	}
	eventually(t, 5*time.Second, "the long record acknowledged", func() bool { return e.pending(0) == 0 })
}
