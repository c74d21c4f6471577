package memberit_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/internal/poll"
)

// leaveSignal closes sent when a leave heartbeat (memberEpoch -1) goes out.
type leaveSignal struct {
	sent chan struct{}
}

func (l *leaveSignal) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Method == http.MethodPost {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"memberEpoch":-1`)) {
			select {
			case <-l.sent:
			default:
				close(l.sent)
			}
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestLeaveAfterTimeoutWaitsForReads: when the leave timeout passes with a
// handler still running, the leave (which reports every shard REVOKED and
// so frees them at once) goes out only after every read loop has returned:
// a blocking XREADGROUP issued before would otherwise still take the
// records written to its shard after the leave into this member's pending
// list, while the shard's next owner reads it.
func TestLeaveAfterTimeoutWaitsForReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "leaveread", 2)
	tr := &leaveSignal{sent: make(chan struct{})}
	release := make(chan struct{})
	holding := make(chan struct{}, 1)
	idle := make(chan struct{}, 1)
	r := e.start("rs-leaveread", func(ctx context.Context, m *member.Message) error {
		if m.Shard == 0 {
			holding <- struct{}{}
			<-release // ignores its context: the leave timeout passes
			return nil
		}
		err := m.Ack(ctx)
		idle <- struct{}{}
		return err
	}, member.WithHTTPClient(&http.Client{Transport: tr}), member.WithMaxWorkers(2),
		member.WithBlock(1500*time.Millisecond), member.WithClaimMinIdle(time.Minute),
		member.WithLeaveTimeout(200*time.Millisecond))
	t.Cleanup(func() { close(release) }) // before the Runtime's stop, which waits for its workers
	e.publish(0, 1, "hold")
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("shard 0's record never reached the handler")
	}
	// Shard 1's read loop blocks for up to 1.5s on a read sent right
	// after its only record was handled.
	e.publish(1, 1, "warm")
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("shard 1's record never reached the handler")
	}
	// Shard 1's next read goes out right after the handler returned.
	poll.Hold(t.Context(), 50*time.Millisecond)
	go r.stop(t)
	select {
	case <-tr.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("no leave heartbeat")
	}
	id := e.publish(1, 1, "after-leave")[0]
	// Nobody reads it, checked for 300 ms.
	var pend []redis.XPendingExt
	var err error
	poll.Stays(300*time.Millisecond, 20*time.Millisecond, func() bool {
		pend, err = e.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{
			Stream: e.key(1), Group: e.prefix, Start: id, End: id, Count: 1,
		}).Result()
		return err == nil && len(pend) == 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) > 0 {
		t.Fatalf("record %s, written after the leave freed shard 1, was read by %s: its read was still blocking when the leave went out",
			id, pend[0].Consumer)
	}
}
