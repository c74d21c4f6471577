package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/internal/poll"
)

// paddedJoin is a valid join of member, padded with spaces to size bytes.
func paddedJoin(member string, size int) []byte {
	b := []byte(fmt.Sprintf(`{"protocolVersion":1,"requestId":"r-%s","memberId":%q,"memberEpoch":0,"metadataVersion":0,`+
		`"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]}`, member, member))
	return append(b, bytes.Repeat([]byte(" "), max(0, size-len(b)))...)
}

// TestLargeBodiesShareABudget: bodies over 64 KiB reserve their size from
// one budget before they are read, so that many connections cannot each
// hold a heartbeat at its limit. While one announced body holds the whole
// budget, another large body (announced or chunked) waits, then answers
// 429 with Retry-After; small bodies are served as usual; once the holder
// is gone the large body is read. Every 429 is counted in
// rscoord_rate_limit_refusals_total{limiter="body_memory"}.
func TestLargeBodiesShareABudget(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Gateway: gateway.Options{
		BodyMemory:     1, // raised to one heartbeat at its limit
		BodyMemoryWait: 300 * time.Millisecond,
	}})
	s.CreateStream("orders", 2)

	// The holder announces a heartbeat at its limit and sends a few bytes:
	// its reservation is the whole budget but 64 KiB.
	holder, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	fmt.Fprintf(holder, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{",
		heartbeatPath("orders", "holder"), gateway.MaxHeartbeatBodyBytes)

	large := paddedJoin("large", 200<<10)
	chunked := func(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) } // no length: sent chunked
	postLarge := func(body io.Reader) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.URL+heartbeatPath("orders", "large"), body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, raw
	}

	// Wait for the holder's reservation: large bodies start answering 429.
	poll.Until(t, 20*time.Second, func() bool {
		status, hdr, raw := postLarge(bytes.NewReader(large))
		if status == http.StatusTooManyRequests {
			if hdr.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
			errorBody(t, "large body past the budget", raw, protocol.CodeRateLimitExceeded)
			return true
		}
		if status != http.StatusOK {
			t.Fatalf("large body while the budget is held: HTTP %d %.300s", status, raw)
		}
		return false
	}, "large bodies to be refused while the budget is held")
	if status, _, raw := postLarge(chunked(large)); status != http.StatusTooManyRequests {
		t.Errorf("chunked large body while the budget is held: HTTP %d %.300s", status, raw)
	}
	admin := `{"requestedBy":"ops","reason":"` + strings.Repeat("r", 500<<10) + `"}`
	if status, raw := s.Do(http.MethodPost, base+"/streams/more", admin); status != http.StatusTooManyRequests {
		t.Errorf("large admin body while the budget is held: HTTP %d %.300s", status, raw)
	}
	// Each refusal is counted (the first one above, the chunked one, the
	// admin one).
	checkMetric(t, s, "rscoord_rate_limit_refusals_total", map[string]string{"limiter": "body_memory"}, func(v float64) bool { return v >= 3 })
	checkMetric(t, s, "rscoord_rate_limit_refusals_total", map[string]string{"limiter": "admin"}, func(v float64) bool { return v == 0 })
	// Small bodies do not wait for the budget.
	var resp protocol.HeartbeatResponse
	s.JSON(http.MethodPost, heartbeatPath("orders", "small"), paddedJoin("small", 1000), http.StatusOK, &resp)
	if resp.Status != protocol.StatusOK {
		t.Fatalf("small heartbeat: %+v", resp)
	}

	// The holder goes away: its reservation is released.
	_ = holder.Close()
	poll.Until(t, 20*time.Second, func() bool {
		status, _, raw := postLarge(chunked(large))
		if status == http.StatusOK {
			if err := json.Unmarshal(raw, &resp); err != nil || resp.Status != protocol.StatusOK {
				t.Fatalf("large heartbeat: %s", raw)
			}
			return true
		}
		if status != http.StatusTooManyRequests {
			t.Fatalf("large body once the holder left: HTTP %d %.300s", status, raw)
		}
		return false
	}, "large bodies to be accepted once the holder left")
	if status, _, raw := postLarge(bytes.NewReader(large)); status != http.StatusOK {
		t.Fatalf("announced large body once the holder left: HTTP %d %.300s", status, raw)
	}
}
