package gateway_test

// Black-box tests of the wire as a client written only from the reference
// protocol meets it: what such a client may send that the contract allows,
// and what it expects back.

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/redisops"
)

// TestNoopMigrationCanBeFollowed: §5 answers a scale to the current count
// with a migration "noop" in state DEPRECATED. A client that follows the
// migration it was answered (GET …/migrations/{reshardingId} until it is
// DEPRECATED or ROLLED_BACK) must find it, a rollback of it is a
// rollback past ACTIVE: 422 ROLLBACK_NOT_ALLOWED, not 404, and a complete
// of it is a complete of a migration already DEPRECATED: 202 with it.
func TestNoopMigrationCanBeFollowed(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 3)
	var noop protocol.Migration
	s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/scale",
		`{"targetShardCount":3,"requestedBy":"ops","reason":"r"}`, http.StatusAccepted, &noop)
	if noop.ReshardingID != protocol.NoopReshardingID || noop.State != protocol.MigrationDeprecated {
		t.Fatalf("scale to the current count answered %+v", noop)
	}

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   protocol.ErrorCode
	}{
		{"get", http.MethodGet, "/streams/orders/groups/orders/migrations/noop", "", http.StatusOK, ""},
		{"rollback", http.MethodPost, "/streams/orders/groups/orders/migrations/noop/rollback",
			`{"requestedBy":"ops","reason":"r"}`, http.StatusUnprocessableEntity, protocol.CodeRollbackNotAllowed},
		{"get of an unknown group", http.MethodGet, "/streams/orders/groups/nope/migrations/noop", "",
			http.StatusNotFound, protocol.CodeGroupNotFound},
		{"get of an unknown stream", http.MethodGet, "/streams/nope/groups/nope/migrations/noop", "",
			http.StatusNotFound, protocol.CodeStreamNotFound},
		{"rollback without requestedBy", http.MethodPost, "/streams/orders/groups/orders/migrations/noop/rollback",
			`{}`, http.StatusBadRequest, protocol.CodeInvalidRequest},
		{"complete", http.MethodPost, "/streams/orders/migrations/noop/complete",
			`{"requestedBy":"ops","reason":"r"}`, http.StatusAccepted, ""},
		{"complete of an unknown stream", http.MethodPost, "/streams/nope/migrations/noop/complete",
			`{"requestedBy":"ops","reason":"r"}`, http.StatusNotFound, protocol.CodeStreamNotFound},
		{"complete without requestedBy", http.MethodPost, "/streams/orders/migrations/noop/complete",
			`{}`, http.StatusBadRequest, protocol.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := s.Do(tc.method, base+tc.path, nilIfEmpty(tc.body))
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, raw)
			}
			if tc.code != "" {
				var eb protocol.ErrorBody
				if err := json.Unmarshal(raw, &eb); err != nil || eb.ErrorCode != tc.code {
					t.Fatalf("body %s, want %s", raw, tc.code)
				}
				return
			}
			coordtest.CheckNoNullArrays(t, raw)
			var got protocol.Migration
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if got.ReshardingID != protocol.NoopReshardingID || got.State != protocol.MigrationDeprecated ||
				got.FromShardCount != 3 || got.ToShardCount != 3 || got.CreatedAt.IsZero() {
				t.Fatalf("noop migration = %s", raw)
			}
		})
	}
}

// nilIfEmpty is body for coordtest.Server.Do: nil (no body) when empty.
func nilIfEmpty(body string) any {
	if body == "" {
		return nil
	}
	return body
}

// TestScaleDeprecatedAfterWithoutZone: times on the wire are "RFC 3339
// strings in UTC" (§ General rules), and the reference clients write some
// without a zone (their heartbeat report times; see decodeHeartbeat). A
// deprecatedAfter written the same way is read as UTC rather than refused,
// on both scale paths, and the audit entry keeps it.
func TestScaleDeprecatedAfterWithoutZone(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	later := time.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
	tests := []struct {
		name   string
		path   string
		value  string
		status int
		want   time.Time
	}{
		{"zone-less, stream path", "/streams/s1/scale", later.Format("2006-01-02T15:04:05.000"), http.StatusAccepted, later},
		{"zone-less without fraction, group path", "/streams/s2/groups/s2/scale", later.Format("2006-01-02T15:04:05"), http.StatusAccepted, later.Truncate(time.Second)},
		{"RFC 3339 with an offset", "/streams/s3/scale", later.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano), http.StatusAccepted, later},
		{"not a time", "/streams/s4/scale", "soon", http.StatusBadRequest, time.Time{}},
		{"empty", "/streams/s5/scale", "", http.StatusBadRequest, time.Time{}},
		{"long garbage", "/streams/s6/scale", strings.Repeat("y", 5000), http.StatusBadRequest, time.Time{}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "s" + string(rune('1'+i))
			s.CreateStream(prefix, 2)
			body := `{"targetShardCount":3,"requestedBy":"ops","reason":"r","deprecatedAfter":"` + tc.value + `"}`
			status, raw := s.Do(http.MethodPost, base+tc.path, body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, raw)
			}
			if status != http.StatusAccepted {
				if len(raw) > 1000 {
					t.Fatalf("a refused time is echoed back: %d-byte answer", len(raw))
				}
				return
			}
			var page protocol.AuditPage
			s.JSON(http.MethodGet, base+"/monitoring/audit?streamPrefix="+prefix+"&limit=1", nil, http.StatusOK, &page)
			if len(page.Entries) != 1 || page.Entries[0].Operation != protocol.AuditScale {
				t.Fatalf("audit = %+v", page.Entries)
			}
			got := page.Entries[0].Requested.DeprecatedAfter
			if got == nil || !got.Equal(tc.want) || page.Entries[0].RequestedBy != "ops" {
				t.Fatalf("audited deprecatedAfter %v requestedBy %q, want %v ops", got, page.Entries[0].RequestedBy, tc.want)
			}
		})
	}
}

// TestProducerRoutingMatchesSlotVectors: the routing answer's stream keys
// and Redis slots are the shared vectors' (routing-vectors.json, "slots"),
// bit for bit, for every stream the vectors name.
func TestProducerRoutingMatchesSlotVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../client/protocol/testdata/routing-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors struct {
		Slots []struct {
			StreamKey string `json:"streamKey"`
			RedisSlot int    `json:"redisSlot"`
		} `json:"slots"`
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int]int{} // prefix → shard → slot
	for _, v := range vectors.Slots {
		i := strings.LastIndexByte(v.StreamKey, ':')
		shard, err := strconv.Atoi(v.StreamKey[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("vector key %q is not prefix:index", v.StreamKey)
		}
		prefix := v.StreamKey[:i]
		if want[prefix] == nil {
			want[prefix] = map[int]int{}
		}
		want[prefix][shard] = v.RedisSlot
	}
	if len(want) == 0 {
		t.Fatal("no slot vectors")
	}
	s := coordtest.Start(t, "", coordtest.Options{})
	for prefix, slots := range want {
		t.Run(prefix, func(t *testing.T) {
			s.CreateStream(prefix, len(slots))
			var r protocol.ProducerRoutingResponse
			s.JSON(http.MethodGet, base+"/streams/"+prefix+"/groups/"+prefix+"/producer-routing", nil, http.StatusOK, &r)
			if r.ShardCount != len(slots) || len(r.Shards) != len(slots) || r.StreamKeyPattern != prefix+":{shardIndex}" {
				t.Fatalf("routing = %+v", r)
			}
			for i, sh := range r.Shards {
				if sh.ShardIndex != i || sh.StreamKey != prefix+":"+strconv.Itoa(i) || sh.RedisSlot != slots[i] {
					t.Errorf("shard %d = %+v, want key %s:%d slot %d", i, sh, prefix, i, slots[i])
				}
			}
		})
	}
}

// TestLongDisplayTextsAreClipped: §6 bounds no text of a heartbeat, and
// INVALID_REQUEST stops a reference client for good. The display texts a
// group keeps (memberName, shard progress texts) are therefore clipped to
// protocol.MaxTextLength bytes rather than refused; requestId, which is
// echoed and compared, is still refused past it.
func TestLongDisplayTextsAreClipped(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	long := strings.Repeat("é", protocol.MaxTextLength) // 2 bytes a rune: clipped inside a rune
	m := coordtest.NewMember("m1", "orders", "orders")
	req := m.Request()
	req.MemberName = long
	resp := s.Heartbeat("orders", "orders", req)
	if resp.Status != protocol.StatusOK {
		t.Fatalf("join with a %d-byte memberName: %s %s", len(long), resp.Status, resp.Message)
	}
	m.Apply(req, resp)
	req = m.Request()
	req.MemberName = long
	req.ShardProgress = []protocol.ShardProgress{{Shard: protocol.Shard{ShardIndex: req.OwnedShards[0].ShardIndex},
		StreamKey: "orders:0" + long, LastDeliveredID: long, LastAckedID: "1-0"}}
	if resp = s.Heartbeat("orders", "orders", req); resp.Status != protocol.StatusOK {
		t.Fatalf("heartbeat with long progress texts: %s %s", resp.Status, resp.Message)
	}
	var members protocol.MembersResponse
	s.JSON(http.MethodGet, base+"/monitoring/streams/orders/groups/orders/members", nil, http.StatusOK, &members)
	got := members.Members[0]
	if len(got.MemberName) > protocol.MaxTextLength || !utf8.ValidString(got.MemberName) || !strings.HasPrefix(long, got.MemberName) ||
		len(got.MemberName) < protocol.MaxTextLength-1 {
		t.Fatalf("memberName kept as %d bytes %q", len(got.MemberName), got.MemberName)
	}
	if len(got.ShardProgress) != 1 || len(got.ShardProgress[0].StreamKey) > protocol.MaxTextLength ||
		len(got.ShardProgress[0].LastDeliveredID) > protocol.MaxTextLength {
		t.Fatalf("progress kept as %+v", got.ShardProgress)
	}

	req = m.Request()
	req.RequestID = strings.Repeat("r", protocol.MaxTextLength+1)
	if resp = s.Heartbeat("orders", "orders", req); resp.Status != protocol.StatusInvalidRequest {
		t.Fatalf("a %d-byte requestId answered %s", len(req.RequestID), resp.Status)
	}
}

// TestZonelessDeprecatedAfterHoldsTheMigration: a deprecatedAfter read
// from a zone-less time reaches the migration, not only the audit log: a
// scale-out past the routing lease stays ACTIVE, waiting for it, until it
// passes.
func TestZonelessDeprecatedAfterHoldsTheMigration(t *testing.T) {
	t.Parallel()
	const lease, check = 300 * time.Millisecond, 100 * time.Millisecond
	rdb := redistest.Standalone(t).Client()
	s := coordtest.Start(t, "", coordtest.Options{Redis: redisops.Wrap(rdb),
		ProducerRoutingLease: lease, DrainCheckInterval: check})
	s.CreateStream("orders", 2)
	after := time.Now().UTC().Add(2 * time.Second)
	var m protocol.Migration
	s.JSON(http.MethodPost, base+"/streams/orders/groups/orders/scale",
		`{"targetShardCount":3,"requestedBy":"ops","reason":"r","deprecatedAfter":"`+after.Format("2006-01-02T15:04:05.000")+`"}`,
		http.StatusAccepted, &m)
	// Once the routing lease has passed, the drain check says what it waits
	// for: deprecatedAfter, still ahead.
	get := func() {
		s.JSON(http.MethodGet, base+"/streams/orders/groups/orders/migrations/"+m.ReshardingID, nil, http.StatusOK, &m)
	}
	if !poll.Soon(10*time.Second, func() bool {
		if strings.Contains(m.Detail, "deprecatedAfter") {
			return true
		}
		if m.State == protocol.MigrationDeprecated {
			t.Fatalf("before deprecatedAfter the migration is %s (%s), want ACTIVE waiting for it", m.State, m.Detail)
		}
		get()
		return strings.Contains(m.Detail, "deprecatedAfter")
	}) {
		t.Fatalf("before deprecatedAfter the migration is %s (%s), want ACTIVE waiting for it", m.State, m.Detail)
	}
	if m.State != protocol.MigrationActive || !time.Now().Before(after) {
		t.Fatalf("the migration is %s (%s) at %v, want ACTIVE before deprecatedAfter %v", m.State, m.Detail, time.Now(), after)
	}
	if !poll.Soon(10*time.Second, func() bool { get(); return m.State == protocol.MigrationDeprecated }) {
		t.Fatalf("migration still %s (%s) long after deprecatedAfter", m.State, m.Detail)
	}
	if time.Now().Before(after) {
		t.Fatalf("DEPRECATED before deprecatedAfter %v", after)
	}
}

// TestScaleDeprecatedAfterRefusalsSayTheFormat: §5 names deprecatedAfter
// a time, and times on the wire are RFC 3339 strings; no client of the
// reference writes it as a number, whose unit (seconds, milliseconds)
// would be a guess that moves the migration's hold by a factor of 1000.
// So a number, like anything else that is not such a string, is 400
// INVALID_REQUEST whose message names the field and the format expected,
// with an example, on both scale paths; null is no deprecatedAfter.
func TestScaleDeprecatedAfterRefusalsSayTheFormat(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	s.CreateStream("orders", 2)
	for _, path := range []string{"/streams/orders/scale", "/streams/orders/groups/orders/scale"} {
		for _, value := range []string{`1767225600`, `1767225600000`, `1767225600.5`, `-1`, `true`, `{}`, `["2026-01-01T00:00:00Z"]`, `"soon"`, `""`} {
			body := `{"targetShardCount":2,"requestedBy":"ops","reason":"r","deprecatedAfter":` + value + `}`
			status, raw := s.Do(http.MethodPost, base+path, body)
			var eb protocol.ErrorBody
			if err := json.Unmarshal(raw, &eb); err != nil || status != http.StatusBadRequest || eb.ErrorCode != protocol.CodeInvalidRequest {
				t.Errorf("%s deprecatedAfter %s: %d %s, want 400 INVALID_REQUEST", path, value, status, raw)
				continue
			}
			for _, want := range []string{"deprecatedAfter", "RFC 3339", `"2026-01-01T00:00:00Z"`} {
				if !strings.Contains(eb.Message, want) {
					t.Errorf("%s deprecatedAfter %s: message %q does not say %s", path, value, eb.Message, want)
				}
			}
		}
		// null is the field left out: a scale to the current count.
		s.JSON(http.MethodPost, base+path, `{"targetShardCount":2,"requestedBy":"ops","deprecatedAfter":null}`, http.StatusAccepted, nil)
	}
}
