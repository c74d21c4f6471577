package memberit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
)

// hangingTransport passes heartbeats through until hang is set; from then
// on a heartbeat never gets an answer: it waits until its request is
// cancelled, as with a coordinator that accepts connections and never
// replies.
type hangingTransport struct {
	mu     sync.Mutex
	hang   bool
	lastOK time.Time // send time of the last heartbeat answered OK
}

func (h *hangingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/heartbeat") {
		return http.DefaultTransport.RoundTrip(req)
	}
	sent := time.Now()
	h.mu.Lock()
	hang := h.hang
	h.mu.Unlock()
	if hang {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ans, err := peekAnswer(resp)
	if err != nil {
		return nil, err
	}
	if ans.Status == protocol.StatusOK {
		h.mu.Lock()
		h.lastOK = sent
		h.mu.Unlock()
	}
	return resp, nil
}

// TestLeaseLapsesWithoutAnyAnswer: the lease is a timer of the member, not
// a reaction to answers. With heartbeats that get no answer at all, a
// handler's context is cancelled when the lease counted from the send of
// the last heartbeat answered OK lapses, and its Ack is refused.
func TestLeaseLapsesWithoutAnyAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "hang", 1)
	tr := &hangingTransport{}
	inHand := make(chan struct{})
	type outcome struct {
		at     time.Time
		ackErr error
	}
	cut := make(chan outcome, 1)
	r := e.start("rs-hang", func(ctx context.Context, m *member.Message) error {
		if m.Fields["eventId"] != "hold-0-0" || m.Redelivered {
			return m.Ack(ctx)
		}
		close(inHand)
		<-ctx.Done()
		cut <- outcome{at: time.Now(), ackErr: m.Ack(context.Background())}
		return nil
	}, member.WithHTTPClient(&http.Client{Transport: tr}))
	e.publish(0, 1, "hold")
	select {
	case <-inHand:
	case <-time.After(10 * time.Second):
		t.Fatal("the record never reached the handler")
	}
	tr.mu.Lock()
	tr.hang = true
	tr.mu.Unlock()
	hangAt := time.Now()
	select {
	case o := <-cut:
		tr.mu.Lock()
		lastOK := tr.lastOK
		tr.mu.Unlock()
		leaseEnd := lastOK.Add(testLease)
		if o.at.Before(leaseEnd.Add(-50*time.Millisecond)) || o.at.After(leaseEnd.Add(300*time.Millisecond)) {
			t.Fatalf("handler context cancelled %v after the last OK heartbeat was sent; want the lease, %v",
				o.at.Sub(lastOK), testLease)
		}
		if !errors.Is(o.ackErr, member.ErrLeaseExpired) {
			t.Fatalf("Ack after the lease lapsed: %v, want ErrLeaseExpired", o.ackErr)
		}
	case <-time.After(testLease + 3*time.Second):
		t.Fatalf("the handler's context was not cancelled %v after heartbeats stopped being answered (lease %v)",
			time.Since(hangAt), testLease)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
