package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
)

// mutation is one admin request of the audit test and the entry it must
// leave.
type mutation struct {
	method, path, body, authorization, requestID string
	status                                       int
	want                                         protocol.AuditEntry
}

func TestAuditRecordsAcceptedAndRefusedMutations(t *testing.T) {
	t.Parallel()
	dir, secret := t.TempDir(), randomSecret(t)
	opts := coordtest.Options{
		Auth:    &coordtest.Auth{Secret: secret},
		Gateway: gateway.Options{AdminRateLimit: 2, AdminRateWindow: time.Hour},
	}
	s := coordtest.Start(t, dir, opts)
	admin := coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))
	reader := coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader))
	writerToken := "Bearer " + login(t, s, coordtest.UserWriter)
	four, five, yes := 4, 5, true
	scale := `{"targetShardCount":4,"requestedBy":"bob","reason":"noop"}`
	muts := []mutation{
		{"POST", "/streams/orders", `{"initialShardCount":4,"requestedBy":"alice","reason":"launch"}`, admin, "req-create", 201,
			protocol.AuditEntry{Operation: protocol.AuditCreateStream, StreamPrefix: "orders", Principal: coordtest.UserAdmin,
				Roles: []string{"ADMIN"}, AuthMethod: "basic", RequestedBy: "alice", Reason: "launch",
				Requested: protocol.AuditRequested{InitialShardCount: &four}, Route: base + "/streams/:prefix",
				Result: protocol.AuditResult{Outcome: protocol.AuditAccepted, Status: 201}}},
		{"POST", "/streams/orders/groups/billing", `{"requestedBy":"eve"}`, reader, "req-forbidden", 403,
			protocol.AuditEntry{Operation: protocol.AuditCreateGroup, StreamPrefix: "orders", ConsumerGroup: "billing",
				Principal: coordtest.UserReader, Roles: []string{"READ"}, AuthMethod: "basic", RequestedBy: "eve",
				Route:  base + "/streams/:prefix/groups/:group",
				Result: protocol.AuditResult{Outcome: protocol.AuditRefused, Status: 403, ErrorCode: protocol.CodeForbidden}}},
		{"DELETE", "/streams/orders/groups/orders", `{"requestedBy":"mallory","reason":"x","force":true}`, "", "req-anon", 401,
			protocol.AuditEntry{Operation: protocol.AuditDeleteGroup, StreamPrefix: "orders", ConsumerGroup: "orders",
				Roles: []string{}, RequestedBy: "mallory", Reason: "x", Requested: protocol.AuditRequested{Force: &yes},
				Route:  base + "/streams/:prefix/groups/:group",
				Result: protocol.AuditResult{Outcome: protocol.AuditRefused, Status: 401, ErrorCode: protocol.CodeUnauthorized}}},
		{"POST", "/streams/orders/scale", scale, writerToken, "", 202,
			protocol.AuditEntry{Operation: protocol.AuditScale, StreamPrefix: "orders", Principal: coordtest.UserWriter,
				Roles: []string{"WRITE"}, AuthMethod: "bearer", RequestedBy: "bob", Reason: "noop",
				Requested: protocol.AuditRequested{TargetShardCount: &four}, Route: base + "/streams/:prefix/scale",
				Result: protocol.AuditResult{Outcome: protocol.AuditAccepted, Status: 202}}},
		{"POST", "/streams/orders/scale", `{"targetShardCount":"five"}`, writerToken, "", 400,
			protocol.AuditEntry{Operation: protocol.AuditScale, StreamPrefix: "orders", Principal: coordtest.UserWriter,
				Roles: []string{"WRITE"}, AuthMethod: "bearer", Route: base + "/streams/:prefix/scale",
				Result: protocol.AuditResult{Outcome: protocol.AuditRefused, Status: 400, ErrorCode: protocol.CodeInvalidRequest}}},
		{"POST", "/streams/orders/scale", `{"targetShardCount":5,"requestedBy":"bob","reason":"grow"}`, writerToken, "", 429,
			protocol.AuditEntry{Operation: protocol.AuditScale, StreamPrefix: "orders", Principal: coordtest.UserWriter,
				Roles: []string{"WRITE"}, AuthMethod: "bearer", RequestedBy: "bob", Reason: "grow",
				Requested: protocol.AuditRequested{TargetShardCount: &five}, Route: base + "/streams/:prefix/scale",
				Result: protocol.AuditResult{Outcome: protocol.AuditRefused, Status: 429, ErrorCode: protocol.CodeRateLimitExceeded}}},
		{"POST", "/streams/orders/groups/orders/migrations/rs-9/rollback", `{"requestedBy":"alice","reason":"oops"}`, admin, "", 404,
			protocol.AuditEntry{Operation: protocol.AuditRollback, StreamPrefix: "orders", ConsumerGroup: "orders", ReshardingID: "rs-9",
				Principal: coordtest.UserAdmin, Roles: []string{"ADMIN"}, AuthMethod: "basic", RequestedBy: "alice", Reason: "oops",
				Route:  base + "/streams/:prefix/groups/:group/migrations/:id/rollback",
				Result: protocol.AuditResult{Outcome: protocol.AuditRefused, Status: 404, ErrorCode: protocol.CodeMigrationNotFound}}},
		{"POST", "/streams/payments/migrations/rs-1/complete", `{"requestedBy":"alice","reason":"drained"}`, admin, "", 404,
			protocol.AuditEntry{Operation: protocol.AuditCompleteMigration, StreamPrefix: "payments", ReshardingID: "rs-1",
				Principal: coordtest.UserAdmin, Roles: []string{"ADMIN"}, AuthMethod: "basic", RequestedBy: "alice", Reason: "drained",
				Route:  base + "/streams/:prefix/migrations/:id/complete",
				Result: protocol.AuditResult{Outcome: protocol.AuditRefused, Status: 404, ErrorCode: protocol.CodeStreamNotFound}}},
	}
	start := time.Now().UTC()
	for i := range muts {
		m := &muts[i]
		req, err := http.NewRequest(m.method, s.URL+base+m.path, strings.NewReader(m.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", fmt.Sprintf("audit-test/%d", i))
		if m.authorization != "" {
			req.Header.Set("Authorization", m.authorization)
		}
		if m.requestID != "" {
			req.Header.Set(gateway.RequestIDHeader, m.requestID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != m.status {
			t.Fatalf("%s %s: %d, want %d: %s", m.method, m.path, resp.StatusCode, m.status, raw)
		}
		echoed := resp.Header.Get(gateway.RequestIDHeader)
		if m.requestID != "" && echoed != m.requestID || echoed == "" {
			t.Fatalf("%s %s: request id %q echoed as %q", m.method, m.path, m.requestID, echoed)
		}
		sum := sha256.Sum256([]byte(m.body))
		m.want.RequestID, m.want.BodySHA256 = echoed, hex.EncodeToString(sum[:])
		if st := m.want.Result.Status; st == 401 || st == 403 || st == 429 {
			// Refused before the handler: audited without the body.
			m.want.BodySHA256, m.want.RequestedBy, m.want.Reason = "", "", ""
			m.want.Requested = protocol.AuditRequested{}
		}
		m.want.Method, m.want.ClientAddress, m.want.UserAgent = m.method, "127.0.0.1", fmt.Sprintf("audit-test/%d", i)
	}
	// Reads and heartbeats are not audited.
	s.JSON(http.MethodGet, base+"/streams/orders/groups/orders", nil, http.StatusOK, nil)
	coordtest.NewMember("m", "orders", "orders").Beat(s)

	check := func(t *testing.T, s *coordtest.Server) {
		var page protocol.AuditPage
		s.As(reader).JSON(http.MethodGet, base+"/monitoring/audit", nil, http.StatusOK, &page)
		if len(page.Entries) != len(muts) || page.Next != nil {
			t.Fatalf("%d entries (next %v), want %d", len(page.Entries), page.Next, len(muts))
		}
		for i, got := range page.Entries {
			want := muts[len(muts)-1-i].want // newest first
			if got.ID == "" || got.Time.Before(start.Add(-time.Second)) || got.Time.After(time.Now().Add(time.Second)) || got.DurationMs < 0 {
				t.Errorf("entry %d: id %q time %v duration %v", i, got.ID, got.Time, got.DurationMs)
			}
			got.ID, got.Time, got.DurationMs = "", time.Time{}, 0
			assertJSONEqual(t, fmt.Sprintf("entry %d (%s)", i, want.Operation), got, want)
		}
	}
	check(t, s)
	s.Stop()
	s = coordtest.Start(t, dir, opts)
	check(t, s)
}

func assertJSONEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	g, w := mustMarshal(t, got), mustMarshal(t, want)
	if g != w {
		t.Errorf("%s:\n got  %s\n want %s", what, g, w)
	}
}

func TestAuditPaging(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	for i := range 7 {
		prefix := fmt.Sprintf("s%d", i)
		if i%3 == 0 {
			prefix = "orders"
		}
		s.JSON(http.MethodPost, base+"/streams/"+prefix+"/groups/g"+fmt.Sprint(i), `{"requestedBy":"ops"}`, http.StatusCreated, nil)
	}
	var all protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?limit=1000", nil, http.StatusOK, &all)
	if len(all.Entries) != 7 || all.Next != nil {
		t.Fatalf("%d entries, next %v", len(all.Entries), all.Next)
	}
	var paged []string
	path := base + "/monitoring/audit?limit=3"
	for pages := 0; ; pages++ {
		var page protocol.AuditPage
		s.JSON(http.MethodGet, path, nil, http.StatusOK, &page)
		for _, e := range page.Entries {
			paged = append(paged, e.ID)
		}
		if page.Next == nil {
			break
		}
		if pages > 5 || len(page.Entries) != 3 {
			t.Fatalf("page %d: %d entries, next %v", pages, len(page.Entries), *page.Next)
		}
		path = base + "/monitoring/audit?limit=3&before=" + *page.Next
	}
	var ids []string
	for _, e := range all.Entries {
		ids = append(ids, e.ID)
	}
	if strings.Join(paged, ",") != strings.Join(ids, ",") {
		t.Fatalf("paged %v, all %v", paged, ids)
	}
	var orders protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?streamPrefix=orders&limit=2", nil, http.StatusOK, &orders)
	if len(orders.Entries) != 2 || orders.Next == nil || orders.Entries[0].StreamPrefix != "orders" {
		t.Fatalf("orders page %+v", orders)
	}
	s.JSON(http.MethodGet, base+"/monitoring/audit?streamPrefix=orders&limit=2&before="+*orders.Next, nil, http.StatusOK, &orders)
	if len(orders.Entries) != 1 || orders.Next != nil || orders.Entries[0].ConsumerGroup != "g0" {
		t.Fatalf("second orders page %+v", orders)
	}
	for _, q := range []string{"limit=0", "limit=x", "limit=1001", "before=abc", "streamPrefix=%7Bx%7D"} {
		s.JSON(http.MethodGet, base+"/monitoring/audit?"+q, nil, http.StatusBadRequest, nil)
	}
	var empty protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?streamPrefix=none", nil, http.StatusOK, &empty)
	if empty.Entries == nil || len(empty.Entries) != 0 {
		t.Fatalf("empty page %+v", empty)
	}
}
