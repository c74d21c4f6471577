package memberit_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/member"
	"github.com/rscoord/rscoord/client/protocol"
)

// seqTransport records the instanceId and requestSeq of every heartbeat
// it sends.
type seqTransport struct {
	mu   sync.Mutex
	sent []protocol.HeartbeatRequest
}

func (s *seqTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	hb, ok, err := peekHeartbeat(req)
	if err != nil {
		return nil, err
	}
	if ok {
		s.mu.Lock()
		s.sent = append(s.sent, hb)
		s.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestHeartbeatsCarryARisingRequestSeq: every heartbeat of one Runtime
// carries its instanceId and a requestSeq above the one before, so that
// the coordinator can tell a late copy of an older heartbeat (docs/protocol.md
// §9.2) from the current one.
func TestHeartbeatsCarryARisingRequestSeq(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "seq", 2)
	tr := &seqTransport{}
	r := e.start("rs-seq", func(ctx context.Context, m *member.Message) error { return m.Ack(ctx) },
		member.WithHTTPClient(&http.Client{Transport: tr}))
	eventually(t, 10*time.Second, "five heartbeats", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.sent) >= 5
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i, hb := range tr.sent {
		if hb.InstanceID == "" || hb.InstanceID != tr.sent[0].InstanceID {
			t.Fatalf("heartbeat %d: instanceId %q, want the Runtime's one (%q)", i, hb.InstanceID, tr.sent[0].InstanceID)
		}
		if hb.RequestSeq <= 0 || i > 0 && hb.RequestSeq <= tr.sent[i-1].RequestSeq {
			t.Fatalf("heartbeat %d: requestSeq %d after %d, want a rising positive sequence", i, hb.RequestSeq, tr.sent[max(i-1, 0)].RequestSeq)
		}
	}
}
