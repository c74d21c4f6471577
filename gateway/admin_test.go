package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

const base = protocol.BasePath

func TestCreateStreamAndGroups(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	var stream protocol.StreamResponse
	s.JSON(http.MethodPost, base+"/streams/orders", `{"initialShardCount":6,"requestedBy":"ops","reason":"launch"}`,
		http.StatusCreated, &stream)
	if stream.StreamPrefix != "orders" || stream.ShardCount != 6 || stream.MetadataVersion < 1 {
		t.Fatalf("stream = %+v", stream)
	}
	// The default group is named like the prefix.
	var g protocol.GroupResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders", nil, http.StatusOK, &g)
	if g.ConsumerGroup != "orders" || g.ShardCount != 6 || g.State != protocol.GroupEmpty {
		t.Fatalf("default group = %+v", g)
	}
	// A second group of the same stream, then the same one again.
	s.JSON(http.MethodPost, base+"/streams/orders/groups/billing", `{"requestedBy":"ops"}`, http.StatusCreated, &g)
	if g.ConsumerGroup != "billing" || g.ShardCount != 6 {
		t.Fatalf("billing = %+v", g)
	}
	// Creating a group creates its stream when missing.
	s.JSON(http.MethodPost, base+"/streams/payments/groups/ledger", `{"initialShardCount":2,"requestedBy":"ops"}`, http.StatusCreated, &g)
	if g.ShardCount != 2 {
		t.Fatalf("ledger = %+v", g)
	}
	var groups protocol.GroupsResponse
	s.JSON(http.MethodGet, base+"/monitoring/groups", nil, http.StatusOK, &groups)
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.StreamPrefix+"/"+g.ConsumerGroup)
	}
	if strings.Join(names, ",") != "orders/billing,orders/orders,payments/ledger" {
		t.Fatalf("groups = %v", names)
	}
}

func TestErrorBodies(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 4)
	big := `{"requestedBy":"` + strings.Repeat("x", protocol.MaxBodyBytes) + `"}`
	tests := []struct {
		name        string
		method      string
		path        string
		body        any
		contentType string
		status      int
		code        protocol.ErrorCode
	}{
		{"duplicate stream", "POST", "/streams/orders", `{"requestedBy":"ops"}`, "", 409, protocol.CodeStreamPrefixAlreadyExists},
		{"duplicate group", "POST", "/streams/orders/groups/orders", `{"requestedBy":"ops"}`, "", 409, protocol.CodeGroupAlreadyExists},
		{"malformed json", "POST", "/streams/fresh", `{"requestedBy":`, "", 400, protocol.CodeInvalidRequest},
		{"wrong field type", "POST", "/streams/fresh", `{"initialShardCount":"four","requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"no requestedBy", "POST", "/streams/fresh", `{}`, "", 400, protocol.CodeInvalidRequest},
		{"array body", "POST", "/streams/fresh", `[{"requestedBy":"ops"}]`, "", 400, protocol.CodeInvalidRequest},
		{"zero shards", "POST", "/streams/fresh", `{"initialShardCount":0,"requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"too many shards", "POST", "/streams/fresh", `{"initialShardCount":100001,"requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"negative version floor", "POST", "/streams/fresh/groups/g", `{"versionFloor":-1,"requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"version floor past 2^53-1", "POST", "/streams/fresh", `{"versionFloor":9007199254740992,"requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"version floor past int64", "POST", "/streams/fresh", `{"versionFloor":1e30,"requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"hash tag prefix", "POST", "/streams/%7Borders%7D", `{"requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"bad group name", "POST", "/streams/orders/groups/a%20b", `{"requestedBy":"ops"}`, "", 400, protocol.CodeInvalidRequest},
		{"wrong content type", "POST", "/streams/fresh", `requestedBy=ops`, "application/x-www-form-urlencoded", 415, protocol.CodeUnsupportedMediaType},
		{"oversize body", "POST", "/streams/fresh", big, "", 413, protocol.CodePayloadTooLarge},
		{"unknown route", "GET", "/nothing/here", nil, "", 404, protocol.CodeNotFound},
		{"unknown method", "PUT", "/streams/orders", `{}`, "", 405, protocol.CodeMethodNotAllowed},
		{"unknown stream", "GET", "/streams/nope/groups/g", nil, "", 404, protocol.CodeStreamNotFound},
		{"unknown group", "GET", "/streams/orders/groups/nope", nil, "", 404, protocol.CodeGroupNotFound},
		{"unknown group members", "GET", "/monitoring/streams/orders/groups/nope/members", nil, "", 404, protocol.CodeGroupNotFound},
		{"routing of unknown stream", "GET", "/streams/nope/groups/g/producer-routing", nil, "", 404, protocol.CodeStreamNotFound},
		{"routing of unknown group", "GET", "/streams/orders/groups/nope/producer-routing", nil, "", 404, protocol.CodeGroupNotFound},
		{"unknown migration", "GET", "/streams/orders/groups/orders/migrations/rs-9", nil, "", 404, protocol.CodeMigrationNotFound},
		{"heartbeat not json", "POST", "/streams/orders/groups/orders/members/m1/heartbeat", `{not json`, "", 400, protocol.CodeInvalidRequest},
		{"scale without target", "POST", "/streams/orders/scale", `{"requestedBy":"ops","reason":"r"}`, "", 400, protocol.CodeInvalidRequest},
		{"scale negative", "POST", "/streams/orders/scale", `{"targetShardCount":-1,"requestedBy":"ops","reason":"r"}`, "", 400, protocol.CodeInvalidRequest},
		{"scale unknown stream", "POST", "/streams/nope/scale", `{"targetShardCount":2,"requestedBy":"ops","reason":"r"}`, "", 404, protocol.CodeStreamNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.URL+base+tc.path, bodyReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body protocol.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("status %d without a JSON error body: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != tc.status || body.ErrorCode != tc.code || body.Message == "" ||
				body.Status != protocol.StatusName(tc.status) {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, body, tc.status, tc.code)
			}
			// Messages are for the client: no Go type of the server's.
			if strings.Contains(body.Message, "protocol.") {
				t.Fatalf("message names a Go type: %q", body.Message)
			}
		})
	}
}

func bodyReader(body any) *strings.Reader {
	if body == nil {
		return strings.NewReader("")
	}
	return strings.NewReader(body.(string))
}

func TestProducerRouting(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: true})
	s.CreateStream("orders", 3)
	var r protocol.ProducerRoutingResponse
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders/producer-routing", nil, http.StatusOK, &r)
	if r.ShardCount != 3 || len(r.Shards) != 3 || r.StreamKeyPattern != "orders:{shardIndex}" {
		t.Fatalf("routing = %+v", r)
	}
	for i, sh := range r.Shards {
		if sh.ShardIndex != i || sh.StreamKey != protocol.StreamKey("orders", i) || sh.RedisSlot != protocol.RedisSlot(sh.StreamKey) {
			t.Fatalf("shard %d = %+v", i, sh)
		}
	}
	// With auto-create on, routing for an unknown group of a known stream registers it.
	s.JSON(http.MethodGet, base+"/streams/orders/groups/audit/producer-routing", nil, http.StatusOK, &r)
	s.JSON(http.MethodGet, base+"/streams/orders/groups/audit", nil, http.StatusOK, nil)
}

func TestDeleteGroup(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	m := coordtest.NewMember("m1", "orders", "orders")
	m.Beat(s)
	status, raw := s.Do(http.MethodDelete, base+"/streams/orders/groups/orders", `{"requestedBy":"ops","reason":"cleanup"}`)
	if status != http.StatusConflict || !strings.Contains(string(raw), string(protocol.CodeGroupHasActiveMembers)) {
		t.Fatalf("delete with a live member: %d %s", status, raw)
	}
	var g protocol.GroupResponse
	s.JSON(http.MethodDelete, base+"/streams/orders/groups/orders", `{"requestedBy":"ops","reason":"cleanup","force":true}`, http.StatusOK, &g)
	if g.ConsumerGroup != "orders" || g.TargetAssignmentSummary["m1"] != 2 {
		t.Fatalf("deleted snapshot = %+v", g)
	}
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders", nil, http.StatusNotFound, nil)
	// The member of a deleted group is unknown now.
	if resp := m.Beat(s); resp.Status != protocol.StatusUnknownMemberID {
		t.Fatalf("heartbeat after delete: %s", resp.Status)
	}
}

func TestMonitoringBasics(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	var h protocol.Health
	s.JSON(http.MethodGet, base+"/monitoring/health", nil, http.StatusOK, &h)
	if h.Status != protocol.HealthUp || h.CoordinatorID == "" {
		t.Fatalf("health = %+v", h)
	}
	var c protocol.Compatibility
	s.JSON(http.MethodGet, base+"/monitoring/compatibility", nil, http.StatusOK, &c)
	if c.CurrentCoordinationVersion != 1 || c.SupportedCoordinationVersions.Min != 1 || len(c.CoordinationVersions) != 1 ||
		c.CoordinationVersions[0].Version != 1 || len(c.CoordinationVersionNumbers) != 1 {
		t.Fatalf("compatibility = %+v", c)
	}
	var sess protocol.Session
	s.JSON(http.MethodGet, base+"/monitoring/session", nil, http.StatusOK, &sess)
	var groups protocol.GroupsResponse
	s.JSON(http.MethodGet, base+"/monitoring/groups", nil, http.StatusOK, &groups)
	if groups.Groups == nil || len(groups.Groups) != 0 {
		t.Fatalf("groups = %+v", groups)
	}
}

// TestRefusedQueryTextsAreNotEchoedWhole: a query parameter refused for
// its form (a messages cursor or direction, an audit cursor, an unknown
// path) is named in the 400 or 404 message, but never echoed whole: any
// client may send a megabyte of it, and the answer, the log line and the
// audit entry would carry it back.
func TestRefusedQueryTextsAreNotEchoedWhole(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	// As long as the server's header limit lets through
	// (gateway.DefaultMaxHeaderBytes, 64 KiB): a longer one is refused
	// before any handler sees it.
	long := strings.Repeat("z", 60_000)
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"messages direction", base + "/monitoring/streams/orders/groups/orders/shards/0/messages?direction=" + long, http.StatusBadRequest},
		{"messages cursor", base + "/monitoring/streams/orders/groups/orders/shards/0/messages?cursor=" + long, http.StatusBadRequest},
		{"audit cursor", base + "/monitoring/audit?before=" + long, http.StatusBadRequest},
		{"unknown path", "/" + long, http.StatusNotFound},
		{"migration id", base + "/streams/orders/groups/orders/migrations/" + long, http.StatusNotFound},
		{"rollback id", base + "/streams/orders/groups/orders/migrations/" + long + "/rollback", http.StatusNotFound},
		{"complete id", base + "/streams/orders/migrations/" + long + "/complete", http.StatusNotFound},
		{"content type", base + "/streams/orders/scale", http.StatusUnsupportedMediaType},
	} {
		method, body, contentType := http.MethodGet, "", ""
		if strings.HasSuffix(tc.path, "/rollback") || strings.HasSuffix(tc.path, "/complete") || strings.HasSuffix(tc.path, "/scale") {
			method, body = http.MethodPost, `{"requestedBy":"ops","targetShardCount":2}`
		}
		if tc.name == "content type" {
			contentType = "application/" + long
		}
		req, err := http.NewRequest(method, s.URL+tc.path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		status, _, raw := roundTrip(t, req)
		if status != tc.status {
			t.Errorf("%s: %d, want %d: %.200s", tc.name, status, tc.status, raw)
			continue
		}
		var eb protocol.ErrorBody
		if err := json.Unmarshal(raw, &eb); err != nil || eb.Message == "" {
			t.Errorf("%s: %.200s is not an error body", tc.name, raw)
		}
		if len(raw) > 2048 {
			t.Errorf("%s: a %d-byte answer echoes the query: %.200s", tc.name, len(raw), raw)
		}
	}
}
