package coordclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// cannotServe are the ways a replica fails a call that make a client move
// on: each with the behaviour of the failing replica and whether the test
// must use a call timeout (the replica never answers).
var cannotServe = []struct {
	name   string
	behave behaviour
	frozen bool
}{
	{"frozen", freeze, true},
	{"connection reset", resetConn, false},
	{"503", answerStatus(http.StatusServiceUnavailable, protocol.CodeStoreUnavailable), false},
	{"502 of a proxy", answerStatus(http.StatusBadGateway, ""), false},
	{"504 of a proxy", answerStatus(http.StatusGatewayTimeout, ""), false},
}

// servedElsewhere are the RETRY codes that say another replica may serve
// the heartbeat now.
var servedElsewhere = []protocol.ErrorCode{
	protocol.CodeReplicaNotOwner, protocol.CodeReplicaLeaseUncertain, protocol.CodeReplicaJoining,
	protocol.CodeCoordinatorTerminating, protocol.CodeStoreUnavailable,
}

// A heartbeat whose replica cannot serve it (frozen, reset, 503, 502,
// 504, RETRY with a code that says another replica may) is sent, the same
// request, to the next URL within the call, and the next call starts there.
func TestHeartbeatMovesOnFromAReplicaThatCannotServe(t *testing.T) {
	type kind struct {
		name   string
		behave behaviour
		frozen bool
	}
	var kinds []kind
	for _, k := range cannotServe {
		kinds = append(kinds, kind(k))
	}
	for _, code := range servedElsewhere {
		kinds = append(kinds, kind{"RETRY " + string(code), answerRetry(code), false})
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			a := newFakeReplica(t, k.behave)
			b := newFakeReplica(t, answerOK(""))
			c, err := New([]string{a.URL(), b.URL()}, Options{MemberLease: 600 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := c.Heartbeat(ctx, "o", "g", hb(1, 0))
			if err != nil || resp.Status != protocol.StatusOK {
				t.Fatalf("first heartbeat: %+v, %v; want OK from the second URL", resp, err)
			}
			atA, atB := a.next(t), b.next(t)
			if atA.RequestID != atB.RequestID || atA.RequestSeq != atB.RequestSeq || atB.RequestSeq != 1 {
				t.Fatalf("the copy differs: %q/%d at the first URL, %q/%d at the second", atA.RequestID, atA.RequestSeq, atB.RequestID, atB.RequestSeq)
			}
			if k.frozen {
				<-a.gaveUp // the frozen copy was cancelled once the second answered
			}
			if resp, err := c.Heartbeat(ctx, "o", "g", hb(2, 0)); err != nil || resp.Status != protocol.StatusOK {
				t.Fatalf("second heartbeat: %+v, %v", resp, err)
			}
			if a.hits.Load() != 1 || b.hits.Load() != 2 || c.URL() != b.URL() {
				t.Fatalf("first URL %d calls, second %d, current %s; want 1, 2 and the second", a.hits.Load(), b.hits.Load(), c.URL())
			}
		})
	}
}

// A RETRY without a code that sends the member elsewhere (the member id
// in use, the group full, the group busy) is the coordinator's decision:
// the client stays.
func TestHeartbeatStaysAfterAPlainRetry(t *testing.T) {
	for _, code := range []protocol.ErrorCode{"", protocol.CodeMemberIDInUse, protocol.CodeMemberLimitReached} {
		t.Run(string(code), func(t *testing.T) {
			a := newFakeReplica(t, answerRetry(code))
			b := newFakeReplica(t, answerOK(""))
			c, err := New([]string{a.URL(), b.URL()}, Options{MemberLease: 600 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			for seq := range int64(2) {
				resp, err := c.Heartbeat(context.Background(), "o", "g", hb(seq+1, 0))
				if err != nil || resp.Status != protocol.StatusRetry || resp.ErrorCode != code {
					t.Fatalf("heartbeat %d: %+v, %v; want RETRY %q", seq+1, resp, err, code)
				}
			}
			if a.hits.Load() != 2 || b.hits.Load() != 0 {
				t.Fatalf("first URL %d calls, second %d; want 2 and 0", a.hits.Load(), b.hits.Load())
			}
		})
	}
}

// A read (GET) is sent again to the next URL within the call when a
// replica breaks the connection or answers 502–504, and after a timeout
// the next call starts at the next URL.
func TestReadMovesOn(t *testing.T) {
	for _, k := range cannotServe {
		t.Run(k.name, func(t *testing.T) {
			a := newFakeReplica(t, k.behave)
			b := newFakeReplica(t, answerOK(""))
			o := Options{}
			if k.frozen {
				o.Timeout = 200 * time.Millisecond
			}
			c, err := New([]string{a.URL(), b.URL()}, o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			_, err = c.Do(context.Background(), http.MethodGet, GroupPath("o", "g"), nil, nil)
			switch {
			case k.frozen && !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("first read: %v; want the timeout", err)
			case k.frozen:
				<-a.gaveUp
			case err != nil:
				t.Fatalf("first read: %v; want the second URL's answer", err)
			}
			if _, err := c.Do(context.Background(), http.MethodGet, GroupPath("o", "g"), nil, nil); err != nil {
				t.Fatal(err)
			}
			wantB := int32(2)
			if k.frozen {
				wantB = 1
			}
			if a.hits.Load() != 1 || b.hits.Load() != wantB {
				t.Fatalf("first URL %d calls, second %d; want 1 and %d", a.hits.Load(), b.hits.Load(), wantB)
			}
		})
	}
}

// An admin mutation that may have reached a replica is never sent again:
// its error is returned, and only the next call goes to the next URL.
func TestMutationIsNotResent(t *testing.T) {
	for _, k := range cannotServe {
		t.Run(k.name, func(t *testing.T) {
			a := newFakeReplica(t, k.behave)
			b := newFakeReplica(t, answerOK(""))
			o := Options{}
			if k.frozen {
				o.Timeout = 200 * time.Millisecond
			}
			c, err := New([]string{a.URL(), b.URL()}, o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			in := map[string]int{"shardCount": 4}
			if _, err := c.Do(context.Background(), http.MethodPost, StreamPath("o"), in, nil); err == nil {
				t.Fatal("the create answered without error; want the first URL's failure")
			}
			if k.frozen {
				<-a.gaveUp
			}
			if b.hits.Load() != 0 {
				t.Fatalf("the create was sent to the second URL too (%d calls)", b.hits.Load())
			}
			if _, err := c.Do(context.Background(), http.MethodDelete, GroupPath("o", "g"), nil, nil); err != nil {
				t.Fatal(err)
			}
			if a.hits.Load() != 1 || b.hits.Load() != 1 {
				t.Fatalf("first URL %d calls, second %d; want 1 and 1", a.hits.Load(), b.hits.Load())
			}
		})
	}
}

// The owner hint is followed only while the hinted URL answers: once it
// fails (a 503 here), the client stays on the URL that answered, hint or
// not; it follows the hint again once the URL answers again, or once
// downFor passed without news of it.
func TestOwnerHintFollowedOnlyWhileItAnswers(t *testing.T) {
	owner := newFakeReplica(t, answerOK(""))
	standby := newFakeReplica(t, answerOK(owner.URL()))
	clock := newFakeClock()
	c, err := New([]string{standby.URL(), owner.URL()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.now = clock.now
	defer c.CloseIdleConnections()
	// call reads once and checks how many requests the stand-by and the
	// owner saw for it.
	call := func(wantS, wantO int32) {
		t.Helper()
		beforeS, beforeO := standby.hits.Load(), owner.hits.Load()
		if _, err := c.Do(context.Background(), http.MethodGet, GroupPath("o", "g"), nil, nil); err != nil {
			t.Fatal(err)
		}
		if gotS, gotO := standby.hits.Load()-beforeS, owner.hits.Load()-beforeO; gotS != wantS || gotO != wantO {
			t.Fatalf("the call reached the stand-by %d and the owner %d times; want %d and %d", gotS, gotO, wantS, wantO)
		}
	}
	call(1, 0) // the stand-by answers, hint: the owner
	call(0, 1)
	owner.set(answerStatus(http.StatusServiceUnavailable, protocol.CodeCoordinatorTerminating))
	call(1, 1) // 503, then the stand-by answers with the owner's hint
	call(1, 0) // the hint names a URL that failed: not followed
	call(1, 0)
	owner.set(answerOK(""))
	clock.advance(downFor)
	call(1, 0) // no news of the owner for downFor: the hint counts again
	call(0, 1)
	call(0, 1)

	// An answer of the owner itself clears its mark at once: it failed,
	// then answered when the stand-by could not.
	owner.set(answerStatus(http.StatusServiceUnavailable, protocol.CodeStoreUnavailable))
	call(1, 1) // 503, then the stand-by
	owner.set(answerOK(""))
	standby.set(answerStatus(http.StatusServiceUnavailable, protocol.CodeReplicaJoining))
	call(1, 1) // the stand-by 503s; the owner, tried last, answers
	standby.set(answerOK(owner.URL()))
	call(0, 1)
	if !strings.HasPrefix(c.URL(), owner.URL()) {
		t.Fatalf("current URL %s, want the owner's", c.URL())
	}
}

// A caller that gives up its call says nothing about the replica: the next
// call starts there again.
func TestCancelledCallKeepsTheURL(t *testing.T) {
	a := newFakeReplica(t, freeze)
	b := newFakeReplica(t, answerOK(""))
	c, err := New([]string{a.URL(), b.URL()}, Options{MemberLease: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Heartbeat(ctx, "o", "g", hb(1, 5000))
		done <- err
	}()
	a.next(t) // the held heartbeat arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled heartbeat: %v", err)
	}
	<-a.gaveUp
	a.set(answerOK(""))
	if _, err := c.Heartbeat(context.Background(), "o", "g", hb(2, 0)); err != nil {
		t.Fatal(err)
	}
	if a.hits.Load() != 2 || b.hits.Load() != 0 {
		t.Fatalf("first URL %d calls, second %d; want 2 and 0", a.hits.Load(), b.hits.Load())
	}
}

// A login changes nothing on the coordinator, so it is sent again to the
// next URL when a replica cannot serve it, as a read is.
func TestLoginMovesOn(t *testing.T) {
	a := newFakeReplica(t, resetConn)
	b := newFakeReplica(t, answerOK(""))
	c, err := New([]string{a.URL(), b.URL()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if _, err := c.Login(context.Background(), "u", "p"); err != nil {
		t.Fatalf("login: %v; want the second URL's answer", err)
	}
	if a.hits.Load() != 1 || b.hits.Load() != 1 {
		t.Fatalf("first URL %d calls, second %d; want 1 and 1", a.hits.Load(), b.hits.Load())
	}
}
