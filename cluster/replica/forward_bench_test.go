package replica

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// BenchmarkForwardHeartbeat is the stand-by's share of a forwarded
// heartbeat: a client posts heartbeats to a server whose handler forwards
// them (front.forward) to an owner that answers a fixed heartbeat answer.
// Compare with BenchmarkDirectHeartbeat, the same client on the owner.
func BenchmarkForwardHeartbeat(b *testing.B) {
	owner := fixedOwner(b)
	f := newFront("bench", slog.New(slog.NewTextHandler(io.Discard, nil)), assign.Config{}, 5*time.Second, nil)
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.forward(w, r, owner.URL) }))
	defer standby.Close()
	postHeartbeats(b, standby.URL)
}

// BenchmarkDirectHeartbeat is BenchmarkForwardHeartbeat without the
// stand-by.
func BenchmarkDirectHeartbeat(b *testing.B) {
	postHeartbeats(b, fixedOwner(b).URL)
}

func fixedOwner(b *testing.B) *httptest.Server {
	answer := bytes.Repeat([]byte("x"), 600)
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(owner.Close)
	return owner
}

func postHeartbeats(b *testing.B, base string) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	defer tr.CloseIdleConnections()
	cli := &http.Client{Transport: tr}
	body := []byte(`{"protocolVersion":1,"requestId":"hb-1","memberId":"pod-a-m0","memberEpoch":4,"ownedShards":[{"shardIndex":1}]}`)
	url := base + protocol.BasePath + "/streams/orders/groups/orders/members/pod-a-m0/heartbeat"
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := cli.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
