package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/redisops"
)

// errorBody decodes a §3 error body, failing the test when raw is not one
// with code want.
func errorBody(t *testing.T, what string, raw []byte, want protocol.ErrorCode) {
	t.Helper()
	var e protocol.ErrorBody
	if err := json.Unmarshal(raw, &e); err != nil || e.ErrorCode != want || e.Status == "" || e.Message == "" {
		t.Errorf("%s: want a %s error body, got %s", what, want, raw)
	}
}

// Message cursors Redis would refuse are the client's mistake (400), and
// cursors at either end of the id space answer an empty page, never 500.
func TestMessageCursors(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb)})
	s.CreateStream("orders", 2)
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"n", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	path := base + "/monitoring/streams/orders/groups/orders/shards/0/messages"
	for _, bad := range []string{
		"?cursor=18446744073709551616-0", // one past 64 bits
		"?cursor=0-18446744073709551616",
		"?cursor=99999999999999999999-0",
		"?cursor=-1-0", "?cursor=1-", "?cursor=-", "?cursor=%2B5-1", "?cursor=1_0-0",
		"?limit=99999999999999999999", "?limit=-3", "?limit=x",
	} {
		status, raw := s.Do(http.MethodGet, path+bad, nil)
		if status != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d %s, want 400", bad, status, raw)
		}
		errorBody(t, bad, raw, protocol.CodeInvalidRequest)
	}
	if status, raw := s.Do(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/shards/99999999999999999999/messages", nil); status != http.StatusBadRequest {
		t.Errorf("a shard index past int: HTTP %d %s", status, raw)
	}
	for _, edge := range []string{
		"?cursor=18446744073709551615-18446744073709551615",
		"?cursor=0-0&direction=BACKWARD",
		"?cursor=00-000&direction=backward",
	} {
		var page protocol.MessagesResponse
		s.JSON(http.MethodGet, path+edge, nil, http.StatusOK, &page)
		if len(page.Messages) != 0 || page.NextCursor != nil {
			t.Errorf("%s: want an empty last page, got %+v", edge, page)
		}
	}
}

// Redis down (or refusing) on a route that reads it answers 503
// REDIS_UNAVAILABLE with Retry-After, not 500; it comes back by itself.
func TestRedisDownAnswers503(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Standalone(t)
	rdb := srv.Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb)})
	s.CreateStream("orders", 2)
	g := base + "/monitoring/streams/orders/groups/orders"
	paths := []string{g + "/shards", g + "/offsets", g + "/shards/0/messages",
		base + "/monitoring/grafana/shards?streamPrefix=orders", base + "/monitoring/grafana/messages?streamPrefix=orders&shard=0"}
	// says is what the message must hold: a refusal, which waiting does
	// not mend, names the key and what Redis said.
	check503 := func(what string, says ...string) {
		t.Helper()
		for _, p := range paths {
			status, hdr, raw := send(t, s.URL, http.MethodGet, p, "", "")
			if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
				t.Errorf("%s: %s: HTTP %d Retry-After %q: %s", what, p, status, hdr.Get("Retry-After"), raw)
			}
			errorBody(t, what+" "+p, raw, protocol.CodeRedisUnavailable)
			for _, want := range says {
				if !strings.Contains(string(raw), want) {
					t.Errorf("%s: %s: the message does not say %q: %s", what, p, want, raw)
				}
			}
		}
	}

	// Refusing: the shard key holds something that is not a stream.
	if err := rdb.Del(ctx, "orders:0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "orders:0", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	check503("WRONGTYPE", "Redis refused the read of orders:0", "WRONGTYPE")
	if err := rdb.Del(ctx, "orders:0").Err(); err != nil {
		t.Fatal(err)
	}

	// Kill keeps the client, which reconnects once Redis is back.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	check503("Redis stopped", "retry later")
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// go-redis backs off redialing a server that refused it: give the
	// client a few seconds to find Redis again.
	for _, p := range paths {
		deadline := time.Now().Add(15 * time.Second)
		for {
			status, raw := s.Do(http.MethodGet, p, nil)
			if status == http.StatusOK {
				break
			}
			if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("Redis back: %s: HTTP %d %s", p, status, raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Every 404 under /console is a §3 error body; the page itself is served.
func TestConsoleUnknownFileIs404(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{})
	for _, p := range []string{"/console/nope", "/console/nope.js", "/console/static/app.js", "/console/..%2fgo.mod", "/console/app.js/x"} {
		status, hdr, raw := send(t, s.URL, http.MethodGet, p, "", "")
		if status != http.StatusNotFound || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("%s: HTTP %d %q: %s", p, status, hdr.Get("Content-Type"), raw)
		}
		errorBody(t, p, raw, protocol.CodeNotFound)
	}
	for _, p := range []string{"/console", "/console/", "/console/app.js", "/console/style.css"} {
		if status, _, raw := send(t, s.URL, http.MethodGet, p, "", ""); status != http.StatusOK {
			t.Errorf("%s: HTTP %d: %.200s", p, status, raw)
		}
	}
}

// Member names match exactly, case included, and a name given twice is
// refused: no second spelling or copy of a field smuggles a value.
func TestJSONKeysMatchExactly(t *testing.T) {
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	s.CreateStream("orders", 4)
	admin := s.Authorization

	for name, tc := range map[string]struct {
		path, body string
		want       int
	}{
		"case-folded required field":   {"/streams/orders/scale", `{"TargetShardCount":2,"requestedBy":"ops"}`, http.StatusBadRequest},
		"duplicate field":              {"/streams/orders/scale", `{"targetShardCount":2,"targetShardCount":3,"requestedBy":"ops"}`, http.StatusBadRequest},
		"duplicate requestedBy":        {"/streams/orders/groups/g2", `{"requestedBy":"ops","requestedBy":"   "}`, http.StatusBadRequest},
		"duplicate nested":             {"/streams/orders/groups/g3", `{"requestedBy":"ops","x":{"a":1,"a":2}}`, http.StatusBadRequest},
		"case-folded extra is unknown": {"/streams/orders/groups/g4", `{"requestedBy":"ops","RequestedBy":"   "}`, http.StatusCreated},
	} {
		status, _, raw := send(t, s.URL, http.MethodPost, base+tc.path, tc.body, admin)
		if status != tc.want {
			t.Errorf("%s: HTTP %d %s, want %d", name, status, raw, tc.want)
		}
		if tc.want == http.StatusBadRequest {
			errorBody(t, name, raw, protocol.CodeInvalidRequest)
		}
	}
	// The audit log kept what the handler read, not a case-folded copy.
	var page protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?limit=50", nil, http.StatusOK, &page)
	for _, e := range page.Entries {
		if e.ConsumerGroup == "g4" && e.RequestedBy != "ops" {
			t.Errorf("audit of g4: requestedBy %q, want ops", e.RequestedBy)
		}
	}

	if status, _, raw := send(t, s.URL, http.MethodPost, base+"/auth/login",
		`{"Username":"root","Password":"root-pw"}`, ""); status != http.StatusBadRequest {
		t.Errorf("login with case-folded names: HTTP %d %s", status, raw)
	}
	if status, _, raw := send(t, s.URL, http.MethodPost, base+"/auth/login",
		`{"username":"reader","password":"reader-pw","username":"root"}`, ""); status != http.StatusBadRequest {
		t.Errorf("login with a duplicate username: HTTP %d %s", status, raw)
	}

	member := coordtest.Basic(coordtest.UserMember, coordtest.Password(coordtest.UserMember))
	hb := base + "/streams/orders/groups/orders/members/m1/heartbeat"
	const rest = `"protocolVersion":1,"requestId":"r","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]`
	for name, tc := range map[string]struct {
		body string
		want protocol.Status
		// why: the answer says what is wrong (errorCode, message).
		why bool
	}{
		"exact names": {`{"memberId":"m1",` + rest + `}`, protocol.StatusOK, false},
		// No memberId at all, as far as the server reads.
		"case-folded memberId": {`{"MemberId":"m1",` + rest + `}`, protocol.StatusInvalidRequest, false},
		"duplicate memberId":   {`{"memberId":"m1","memberId":"m2",` + rest + `}`, protocol.StatusInvalidRequest, true},
		"duplicate in a shard": {`{"memberId":"m1",` + rest + `,"revokingShards":[{"shard":{"shardIndex":1,"shardIndex":2},"state":"REVOKED","inFlight":0}]}`, protocol.StatusInvalidRequest, true},
	} {
		// A heartbeat answers well-formed JSON in a 200, whatever it holds.
		status, _, raw := send(t, s.URL, http.MethodPost, hb, tc.body, member)
		var resp protocol.HeartbeatResponse
		if status != http.StatusOK || json.Unmarshal(raw, &resp) != nil || resp.Status != tc.want {
			t.Errorf("%s: HTTP %d %s, want status %s", name, status, raw, tc.want)
			continue
		}
		if tc.why && (resp.ErrorCode != protocol.CodeInvalidRequest || resp.Message == "") {
			t.Errorf("%s: INVALID_REQUEST without saying why: %s", name, raw)
		}
	}
}
