package gateway_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

func TestAdminRateLimit(t *testing.T) {
	const limit = 3
	s := coordtest.Start(t, "", coordtest.Options{
		Auth:    &coordtest.Auth{},
		Gateway: gateway.Options{AdminRateLimit: limit, AdminRateWindow: time.Hour},
	})
	admin := s
	writer := s.As(coordtest.Basic(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter)))
	admin.CreateStream("orders", 4) // 1 of admin's stream-level budget for orders
	for _, g := range []string{"a", "b"} {
		admin.JSON(http.MethodPost, base+"/streams/orders/groups/"+g, `{"requestedBy":"ops"}`, http.StatusCreated, nil)
	}
	// limit mutations of group a by the writer; refused ones count too.
	writer.JSON(http.MethodDelete, base+"/streams/orders/groups/a", `{"reason":"no requester"}`, http.StatusBadRequest, nil)
	for range limit - 1 {
		writer.JSON(http.MethodPost, base+"/streams/orders/groups/a/scale", `{"targetShardCount":4,"requestedBy":"ops","reason":"r"}`, http.StatusAccepted, nil)
	}
	status, hdr, raw := send(t, s.URL, http.MethodPost, base+"/streams/orders/groups/a/scale",
		`{"targetShardCount":4,"requestedBy":"ops","reason":"r"}`, writer.Authorization)
	if status != http.StatusTooManyRequests || !contains(raw, protocol.CodeRateLimitExceeded) {
		t.Fatalf("mutation %d: %d %s", limit+1, status, raw)
	}
	if secs, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || secs < 1 || secs > 3600 {
		t.Fatalf("Retry-After %q", hdr.Get("Retry-After"))
	}
	// Another group, and another principal on the same group, are not
	// affected; nor are reads and heartbeats.
	writer.JSON(http.MethodPost, base+"/streams/orders/groups/b/scale", `{"targetShardCount":4,"requestedBy":"ops","reason":"r"}`, http.StatusAccepted, nil)
	admin.JSON(http.MethodPost, base+"/streams/orders/groups/a/scale", `{"targetShardCount":4,"requestedBy":"ops","reason":"r"}`, http.StatusAccepted, nil)
	for range 3 * limit {
		writer.JSON(http.MethodGet, base+"/streams/orders/groups/a", nil, http.StatusOK, nil)
	}
	m := coordtest.NewMember("m1", "orders", "a")
	for i := range 3 * limit {
		if resp := m.Beat(s.As(coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember)))); resp.Status != protocol.StatusOK {
			t.Fatalf("heartbeat %d: %s", i, resp.Status)
		}
	}
	checkMetric(t, s, "rscoord_rate_limit_refusals_total", map[string]string{"limiter": "admin"}, func(v float64) bool { return v == 1 })
}
