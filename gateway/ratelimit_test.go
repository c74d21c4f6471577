package gateway_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

func TestAdminRateLimit(t *testing.T) {
	t.Parallel()
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

// TestAdminRateLimitFloodLocksNoOneOut: a WRITE user who sends mutations
// to more distinct groups than its budget is limited itself, past that
// budget: other principals'
// mutations and logouts, its own logout and its own groups already
// counted go on as before, and the limiter's memory stays within the
// budget.
func TestAdminRateLimitFloodLocksNoOneOut(t *testing.T) {
	t.Parallel()
	// Twice its budget: before the budget, every one was counted, and a
	// flood of 100,000 filled the table for everyone (the window
	// package's tests flood the limiter itself with that many).
	const flood = 2 * gateway.AdminGroupsPerPrincipal
	opts := gateway.Options{AdminRateLimit: 30, AdminRateWindow: time.Hour}
	windows := gateway.AdminLimitWindows(&opts)
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}, Gateway: opts})
	// Bearer tokens: a Basic check is a bcrypt hash per request.
	writer := "Bearer " + login(t, s, coordtest.UserWriter)
	admin := s.As("Bearer " + login(t, s, coordtest.UserAdmin))

	const workers = 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var (
		next, passed, limited atomic.Int64
		wg                    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= flood || t.Failed() {
					return
				}
				// A DELETE with no requester: 400 from the handler once
				// past the limiter, without touching any group.
				req, err := http.NewRequest(http.MethodDelete, s.URL+base+"/streams/orders/groups/g"+strconv.FormatInt(i, 10),
					strings.NewReader(`{"reason":"flood"}`))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", writer)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusBadRequest:
					passed.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
					if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 || secs > 3600 {
						t.Errorf("flood request %d: Retry-After %q", i, resp.Header.Get("Retry-After"))
					}
				default:
					t.Errorf("flood request %d: %d", i, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if passed.Load() != gateway.AdminGroupsPerPrincipal || limited.Load() != flood-gateway.AdminGroupsPerPrincipal {
		t.Errorf("the flood: %d passed and %d were limited, want %d and %d",
			passed.Load(), limited.Load(), gateway.AdminGroupsPerPrincipal, flood-gateway.AdminGroupsPerPrincipal)
	}
	if n := windows(); n > gateway.AdminGroupsPerPrincipal {
		t.Errorf("the admin limiter holds %d windows after the flood, want at most %d", n, gateway.AdminGroupsPerPrincipal)
	}

	// The flooder is limited on new groups, with Retry-After...
	status, hdr, raw := send(t, s.URL, http.MethodDelete, base+"/streams/orders/groups/one-more", `{"reason":"flood"}`, writer)
	if status != http.StatusTooManyRequests || !contains(raw, protocol.CodeRateLimitExceeded) {
		t.Errorf("the flooder's next new group: %d %s, want 429", status, raw)
	}
	if secs, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || secs < 1 || secs > 3600 {
		t.Errorf("the flooder's Retry-After %q", hdr.Get("Retry-After"))
	}
	// ...but not on a group it already has a window for, within its limit.
	if status, _, raw := send(t, s.URL, http.MethodDelete, base+"/streams/orders/groups/g0", `{"reason":"flood"}`, writer); status != http.StatusBadRequest {
		t.Errorf("the flooder on a group already counted: %d %s, want 400", status, raw)
	}
	// Another principal opens new windows as usual, and logs out; so does
	// the flooder: revoking a token is never refused for the groups its
	// principal touched.
	steps := []struct {
		name, method, path, body, authorization string
		want                                    int
	}{
		{"another principal's new stream", http.MethodPost, base + "/streams/orders", `{"initialShardCount":2,"requestedBy":"ops"}`, admin.Authorization, http.StatusCreated},
		{"another principal's new group", http.MethodPost, base + "/streams/orders/groups/a", `{"requestedBy":"ops"}`, admin.Authorization, http.StatusCreated},
		{"another principal's logout", http.MethodPost, base + "/auth/logout", "", admin.Authorization, http.StatusNoContent},
		{"the flooder's logout", http.MethodPost, base + "/auth/logout", "", writer, http.StatusNoContent},
	}
	for _, st := range steps {
		if status, _, raw := send(t, s.URL, st.method, st.path, st.body, st.authorization); status != st.want {
			t.Errorf("%s: %d %s, want %d", st.name, status, raw, st.want)
		}
	}
	if n := windows(); n > gateway.AdminGroupsPerPrincipal+2 {
		t.Errorf("the admin limiter holds %d windows, want at most %d", n, gateway.AdminGroupsPerPrincipal+2)
	}
}

// TestAdminRateLimitLongNames: the admin limiter keeps at most one byte
// past the longest valid name of a path, so that names too long (which a
// path of up to the headers' size can carry) cost its table no more than
// valid ones: names that agree that far share one window.
func TestAdminRateLimitLongNames(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{
		Auth:    &coordtest.Auth{},
		Gateway: gateway.Options{AdminRateLimit: 1, AdminRateWindow: time.Hour},
	})
	longest := strings.Repeat("g", protocol.MaxNameLength)
	tests := []struct {
		name         string
		first, again string
		want         int
	}{
		{"valid names differing in their last byte", longest[1:] + "a", longest[1:] + "b", http.StatusBadRequest},
		{"the longest valid name and one a byte longer", longest, longest + "x", http.StatusBadRequest},
		{"names too long agreeing past the longest valid", longest + "xa", longest + "xb" + strings.Repeat("z", 10_000), http.StatusTooManyRequests},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := base + "/streams/s" + strconv.Itoa(i) + "/groups/"
			if status, _, raw := send(t, s.URL, http.MethodDelete, stream+tt.first, `{"reason":"r"}`, s.Authorization); status != http.StatusBadRequest {
				t.Fatalf("first: %d %s, want 400", status, raw)
			}
			if status, _, raw := send(t, s.URL, http.MethodDelete, stream+tt.again, `{"reason":"r"}`, s.Authorization); status != tt.want {
				t.Fatalf("again: %d %s, want %d", status, raw, tt.want)
			}
		})
	}
}
