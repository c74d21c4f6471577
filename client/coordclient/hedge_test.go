package coordclient

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestHedgeBound(t *testing.T) {
	tests := []struct {
		name    string
		own     time.Duration
		learned time.Duration
		want    time.Duration
	}{
		{"nothing known: the default lease's", 0, 0, time.Second},
		{"own lease", 3 * time.Second, 0, 500 * time.Millisecond},
		{"answered lease shorter", 3 * time.Second, 1200 * time.Millisecond, 200 * time.Millisecond},
		{"answered lease longer", 3 * time.Second, 15 * time.Second, 500 * time.Millisecond},
		{"answered lease alone", 0, 600 * time.Millisecond, 100 * time.Millisecond},
		{"long lease: at most 1 s", time.Minute, 0, time.Second},
	}
	for _, tc := range tests {
		c, err := New([]string{"a:1", "b:2"}, Options{MemberLease: tc.own})
		if err != nil {
			t.Fatal(err)
		}
		c.lease.Store(int64(tc.learned))
		if got := c.HedgeBound(); got != tc.want {
			t.Errorf("%s: HedgeBound() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A heartbeat the first URL holds unanswered (a frozen replica) is sent,
// same requestId and requestSeq, to the second once the bound passed; the
// second's answer wins, the frozen copy is cancelled, and the lease the
// answer carries is learned.
func TestHedgedHeartbeatAnsweredByTheSecondURL(t *testing.T) {
	a := newFakeReplica(t, freeze)
	b := newFakeReplica(t, answerOK(""))
	c, err := New([]string{a.URL(), b.URL()}, Options{MemberLease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	bound := c.HedgeBound()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := c.Heartbeat(ctx, "o", "g", hb(7, 0))
	took := time.Since(start)
	if err != nil || resp.Status != protocol.StatusOK || resp.ResponseTo != hb(7, 0).RequestID {
		t.Fatalf("hedged heartbeat: %+v, %v", resp, err)
	}
	if took < bound {
		t.Fatalf("answered after %v: the copy went out before the bound %v", took, bound)
	}
	if ctx.Err() != nil {
		t.Fatal("the call ran into its deadline: the copy was not sent")
	}
	<-a.gaveUp
	atA, atB := a.next(t), b.next(t)
	if atA.RequestID != atB.RequestID || atA.RequestSeq != 7 || atB.RequestSeq != 7 {
		t.Fatalf("copies %q/%d and %q/%d; want the same requestId and requestSeq 7", atA.RequestID, atA.RequestSeq, atB.RequestID, atB.RequestSeq)
	}
	if got := c.HedgeBound(); got != 500*time.Millisecond {
		t.Fatalf("HedgeBound after an answer of memberLeaseMs 6000 under an own lease of 3 s: %v, want 500ms", got)
	}
}

// A held heartbeat (waitMs) is hedged only once its wait and the bound
// passed: answered within its hold it goes nowhere else, held past it the
// copy goes out, with waitMs 0, no sooner than waitMs + bound.
func TestHeldHeartbeatIsHedgedOnlyAfterItsWait(t *testing.T) {
	const waitMs = 1000
	t.Run("answered within its hold", func(t *testing.T) {
		a := newFakeReplica(t, holdThenOK(250*time.Millisecond)) // past the bound (100 ms), within waitMs
		b := newFakeReplica(t, answerOK(""))
		c, err := New([]string{a.URL(), b.URL()}, Options{MemberLease: 600 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		if resp, err := c.Heartbeat(context.Background(), "o", "g", hb(1, waitMs)); err != nil || resp.Status != protocol.StatusOK {
			t.Fatalf("held heartbeat: %+v, %v", resp, err)
		}
		if b.hits.Load() != 0 {
			t.Fatalf("a heartbeat answered within its hold was also sent to the second URL")
		}
	})
	t.Run("held past it", func(t *testing.T) {
		a := newFakeReplica(t, freeze)
		b := newFakeReplica(t, answerOK(""))
		c, err := New([]string{a.URL(), b.URL()}, Options{MemberLease: 600 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		start := time.Now()
		resp, err := c.Heartbeat(context.Background(), "o", "g", hb(1, waitMs))
		took := time.Since(start)
		if err != nil || resp.Status != protocol.StatusOK {
			t.Fatalf("held heartbeat: %+v, %v", resp, err)
		}
		if want := waitMs*time.Millisecond + c.HedgeBound(); took < want {
			t.Fatalf("answered after %v: the copy went out before waitMs + bound (%v)", took, want)
		}
		<-a.gaveUp
		if atA, atB := a.next(t), b.next(t); atA.WaitMs != waitMs || atB.WaitMs != 0 || atA.RequestID != atB.RequestID || atA.RequestSeq != atB.RequestSeq {
			t.Fatalf("held request %+v, copy %+v; want the same request, the copy not held", atA, atB)
		}
	})
}

// Every URL but the last frozen: the heartbeat goes on to each in turn,
// one bound apart, and the last one's answer wins; both frozen copies are
// cancelled.
func TestHedgeGoesOnWhileCopiesHang(t *testing.T) {
	a := newFakeReplica(t, freeze)
	b := newFakeReplica(t, freeze)
	c3 := newFakeReplica(t, answerOK(""))
	c, err := New([]string{a.URL(), b.URL(), c3.URL()}, Options{MemberLease: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	start := time.Now()
	resp, err := c.Heartbeat(context.Background(), "o", "g", hb(1, 0))
	if err != nil || resp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat: %+v, %v", resp, err)
	}
	if took := time.Since(start); took < 2*c.HedgeBound() {
		t.Fatalf("answered after %v, before two bounds passed", took)
	}
	<-a.gaveUp
	<-b.gaveUp
	if c.URL() != c3.URL() {
		t.Fatalf("current URL %s, want the one that answered", c.URL())
	}
}

// A plain RETRY of one copy does not win while another copy is out: the
// held copy answered RETRY because the second copy reached the same
// coordinator (it answers a displaced held heartbeat so), and the second
// copy's OK is what the member gets.
func TestRetryOfOneCopyWaitsForTheOther(t *testing.T) {
	copyArrived := make(chan struct{})
	retryHeard := make(chan struct{}, 1)
	a := newFakeReplica(t, func(f *fakeReplica, w http.ResponseWriter, r *http.Request, body []byte) {
		select {
		case <-copyArrived:
		case <-r.Context().Done():
			return
		}
		answerRetry("")(f, w, r, body)
	})
	b := newFakeReplica(t, func(f *fakeReplica, w http.ResponseWriter, r *http.Request, body []byte) {
		close(copyArrived)
		select {
		case <-retryHeard:
		case <-r.Context().Done():
			return
		}
		answerOK("")(f, w, r, body)
	})
	c, err := New([]string{a.URL(), b.URL()}, Options{MemberLease: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.heard = func(s protocol.Status) {
		if s == protocol.StatusRetry {
			retryHeard <- struct{}{}
		}
	}
	defer c.CloseIdleConnections()
	resp, err := c.Heartbeat(context.Background(), "o", "g", hb(1, 0))
	if err != nil || resp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat: %+v, %v; want the second copy's OK", resp, err)
	}
}

// Every URL answered RETRY with a code that sends the member elsewhere, or
// hangs past its bound: the RETRY is returned at once, not at the call's
// deadline, so that the member can heartbeat again soon.
func TestAllURLsTriedReturnsTheRetry(t *testing.T) {
	a := newFakeReplica(t, freeze)
	b := newFakeReplica(t, answerRetry(protocol.CodeReplicaNotOwner))
	c3 := newFakeReplica(t, answerRetry(protocol.CodeReplicaNotOwner))
	c, err := New([]string{a.URL(), b.URL(), c3.URL()}, Options{MemberLease: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Heartbeat(ctx, "o", "g", hb(1, 0))
	if err != nil || resp.Status != protocol.StatusRetry || resp.ErrorCode != protocol.CodeReplicaNotOwner {
		t.Fatalf("heartbeat: %+v, %v; want RETRY REPLICA_NOT_OWNER", resp, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the RETRY came at the call's deadline")
	}
	<-a.gaveUp
	if b.hits.Load() != 1 || c3.hits.Load() != 1 {
		t.Fatalf("the copies reached the second URL %d and the third %d times; want once each", b.hits.Load(), c3.hits.Load())
	}
}

// The owner hint names a replica that froze: the heartbeat hedged away
// from it is answered by the stand-by, whose answer names the frozen
// owner again; the client does not go back to it.
func TestHintOfAFrozenOwnerIsNotFollowed(t *testing.T) {
	owner := newFakeReplica(t, answerOK(""))
	standby := newFakeReplica(t, answerOK(owner.URL()))
	c, err := New([]string{standby.URL(), owner.URL()}, Options{MemberLease: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	beat := func(seq int64) {
		t.Helper()
		if resp, err := c.Heartbeat(context.Background(), "o", "g", hb(seq, 0)); err != nil || resp.Status != protocol.StatusOK {
			t.Fatalf("heartbeat %d: %+v, %v", seq, resp, err)
		}
	}
	beat(1) // the stand-by names the owner
	if c.URL() != owner.URL() {
		t.Fatalf("current URL %s, want the hinted owner", c.URL())
	}
	owner.set(freeze)
	beat(2) // the owner holds it; the copy goes to the stand-by
	<-owner.gaveUp
	beat(3)
	beat(4)
	if owner.hits.Load() != 1 || standby.hits.Load() != 4 {
		t.Fatalf("owner %d calls, stand-by %d; want 1 (the frozen one) and 4", owner.hits.Load(), standby.hits.Load())
	}
}
