package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

func TestStreamCreate(t *testing.T) {
	created := `{"streamPrefix":"orders","shardCount":4,"metadataVersion":1}`
	runCases(t, []cliCase{
		{
			name: "with shards and reason",
			args: []string{"stream", "create", "orders", "--shards", "4", "--requested-by", "me", "--reason", "demo"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders",
				body: `{"initialShardCount":4,"requestedBy":"me","reason":"demo"}`},
			status:  http.StatusCreated,
			answer:  created,
			wantOut: []string{"STREAM PREFIX", "orders", "SHARD COUNT", "4", "METADATA VERSION", "1"},
		},
		{
			name: "server default shard count",
			args: []string{"stream", "create", "orders", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders",
				body: `{"requestedBy":"me"}`},
			status:  http.StatusCreated,
			answer:  created,
			wantOut: []string{"SHARD COUNT", "4"},
		},
		{
			name: "requested-by defaults to the user",
			args: []string{"stream", "create", "orders"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders",
				body: mustJSON(t, protocol.CreateRequest{RequestedBy: defaultRequester()})},
			status: http.StatusCreated,
			answer: created,
		},
		{
			name: "json",
			args: []string{"stream", "create", "orders", "--requested-by", "me", "--json"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders",
				body: `{"requestedBy":"me"}`},
			status:   http.StatusCreated,
			answer:   created,
			wantJSON: true,
			wantOut:  []string{`"streamPrefix": "orders"`, `"shardCount": 4`},
			notOut:   []string{"SHARD COUNT"},
		},
		{
			name: "conflict",
			args: []string{"stream", "create", "orders", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders",
				body: `{"requestedBy":"me"}`},
			status:   http.StatusConflict,
			answer:   `{"status":"CONFLICT","errorCode":"STREAM_PREFIX_ALREADY_EXISTS","message":"Stream already exists"}`,
			wantCode: exitError,
			wantErr:  "rscoord: 409 STREAM_PREFIX_ALREADY_EXISTS: Stream already exists\n",
		},
		{
			name: "conflict with --exist-ok",
			args: []string{"stream", "create", "orders", "--requested-by", "me", "--exist-ok"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders",
				body: `{"requestedBy":"me"}`},
			status:  http.StatusConflict,
			answer:  `{"status":"CONFLICT","errorCode":"STREAM_PREFIX_ALREADY_EXISTS","message":"Stream already exists"}`,
			wantOut: []string{"stream orders exists already"},
		},
		{
			name: "other conflict with --exist-ok still fails",
			args: []string{"stream", "create", "orders", "--requested-by", "me", "--exist-ok"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders",
				body: `{"requestedBy":"me"}`},
			status:   http.StatusServiceUnavailable,
			answer:   `{"status":"SERVICE_UNAVAILABLE","errorCode":"COORDINATOR_TERMINATING","message":"stopping"}`,
			wantCode: exitError,
			wantErr:  "COORDINATOR_TERMINATING",
		},
		{
			name:     "hash tag in prefix is refused before any request",
			args:     []string{"stream", "create", "{orders}"},
			wantCode: exitError,
			wantErr:  "streamPrefix",
		},
		{
			name:     "zero shards refused before any request",
			args:     []string{"stream", "create", "orders", "--shards", "0"},
			wantCode: exitError,
			wantErr:  "--shards 0",
		},
	})
}

func TestStreamScale(t *testing.T) {
	scaled := `{"streamPrefix":"orders","targetShardCount":8,"affectedConsumerGroups":["billing","orders"],
		"migrations":[{"reshardingId":"rs-1","fromShardCount":4,"toShardCount":8,"state":"ACTIVE",
		"createdAt":"2026-11-29T10:00:00Z","updatedAt":"2026-11-29T10:00:01Z"}]}`
	runCases(t, []cliCase{
		{
			name: "scale out",
			args: []string{"stream", "scale", "orders", "--to", "8", "--reason", "grow", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders/scale",
				body: `{"targetShardCount":8,"requestedBy":"me","reason":"grow"}`},
			status: http.StatusAccepted,
			answer: scaled,
			wantOut: []string{"Scaling orders to 8 shards", "billing, orders",
				"RESHARDING ID", "FROM", "TO", "STATE", "CREATED", "UPDATED",
				"rs-1", "4", "8", "ACTIVE", "2026-11-29T10:00:00Z"},
		},
		{
			name: "scale to zero sends the zero",
			args: []string{"stream", "scale", "orders", "--to", "0", "--reason", "retire", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders/scale",
				body: `{"targetShardCount":0,"requestedBy":"me","reason":"retire"}`},
			status:  http.StatusAccepted,
			answer:  `{"streamPrefix":"orders","targetShardCount":0,"affectedConsumerGroups":[],"migrations":[]}`,
			wantOut: []string{"Scaling orders to 0 shards", "No migrations."},
		},
		{
			name: "json",
			args: []string{"stream", "scale", "orders", "--to", "8", "--reason", "grow", "--requested-by", "me", "--json"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders/scale",
				body: `{"targetShardCount":8,"requestedBy":"me","reason":"grow"}`},
			status:   http.StatusAccepted,
			answer:   scaled,
			wantJSON: true,
			wantOut:  []string{`"reshardingId": "rs-1"`},
		},
		{
			name: "active migration",
			args: []string{"stream", "scale", "orders", "--to", "8", "--reason", "grow", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders/scale",
				body: `{"targetShardCount":8,"requestedBy":"me","reason":"grow"}`},
			status:   http.StatusConflict,
			answer:   `{"status":"CONFLICT","errorCode":"ACTIVE_MIGRATION_EXISTS","message":"A migration is already active"}`,
			wantCode: exitError,
			wantErr:  "rscoord: 409 ACTIVE_MIGRATION_EXISTS: A migration is already active\n",
		},
		{
			name:     "reason is required",
			args:     []string{"stream", "scale", "orders", "--to", "8"},
			wantCode: exitUsage,
			wantErr:  "--reason",
		},
		{
			name:     "target is required",
			args:     []string{"stream", "scale", "orders", "--reason", "grow"},
			wantCode: exitUsage,
			wantErr:  "--to",
		},
		{
			name:     "negative target refused before any request",
			args:     []string{"stream", "scale", "orders", "--to=-1", "--reason", "x"},
			wantCode: exitError,
			wantErr:  "--to -1",
		},
		{
			name:     "bad prefix refused before any request",
			args:     []string{"stream", "scale", "or ders", "--to", "8", "--reason", "x"},
			wantCode: exitError,
			wantErr:  "streamPrefix",
		},
	})
}

// groupsAnswer lists two groups of orders and one of payments.
const groupsAnswer = `{"groups":[
 {"streamPrefix":"payments","consumerGroup":"ledger","state":"STABLE","groupEpoch":1,"assignmentEpoch":1,
  "metadataVersion":2,"shardCount":2,"activeMigration":null,
  "targetAssignmentSummary":{"p-0":2},"currentAssignmentSummary":{"p-0":2}},
 {"streamPrefix":"orders","consumerGroup":"orders","state":"RECONCILING","groupEpoch":5,"assignmentEpoch":5,
  "metadataVersion":7,"shardCount":4,
  "activeMigration":{"reshardingId":"rs-9","fromShardCount":4,"toShardCount":8,"state":"ACTIVE",
   "createdAt":"2026-11-29T10:00:00Z","updatedAt":"2026-11-29T10:00:00Z"},
  "targetAssignmentSummary":{"pod-a":2,"pod-b":2},"currentAssignmentSummary":{"pod-a":4}},
 {"streamPrefix":"orders","consumerGroup":"billing","state":"EMPTY","groupEpoch":0,"assignmentEpoch":0,
  "metadataVersion":1,"shardCount":4,"activeMigration":null,
  "targetAssignmentSummary":{},"currentAssignmentSummary":{}}
]}`

func TestStreamStatus(t *testing.T) {
	get := &wantRequest{method: "GET", path: "/coord/v1/monitoring/groups"}
	runCases(t, []cliCase{
		{
			name:   "groups of the prefix, sorted",
			args:   []string{"stream", "status", "orders"},
			want:   get,
			answer: groupsAnswer,
			wantOut: []string{
				"GROUP", "STATE", "SHARDS", "GROUP EPOCH", "ASSIGNMENT EPOCH", "METADATA VERSION", "MEMBERS", "ACTIVE MIGRATION",
				"billing", "EMPTY", "4", "0", "0", "1", "0", "-",
				"orders", "RECONCILING", "4", "5", "5", "7", "2", "rs-9 (4→8 ACTIVE)",
			},
			notOut: []string{"ledger", "payments"},
		},
		{
			name:     "json keeps only the prefix",
			args:     []string{"stream", "status", "orders", "--json"},
			want:     get,
			answer:   groupsAnswer,
			wantJSON: true,
			wantOut:  []string{`"consumerGroup": "billing"`, `"consumerGroup": "orders"`},
			notOut:   []string{"ledger"},
		},
		{
			name:     "unknown stream",
			args:     []string{"stream", "status", "shipping"},
			want:     get,
			answer:   groupsAnswer,
			wantCode: exitError,
			wantErr:  `rscoord: 404 STREAM_NOT_FOUND: no consumer group of stream "shipping"`,
		},
		{
			name:     "store unavailable",
			args:     []string{"stream", "status", "orders"},
			want:     get,
			status:   http.StatusServiceUnavailable,
			header:   map[string]string{"Retry-After": "3"},
			answer:   `{"status":"SERVICE_UNAVAILABLE","errorCode":"STORE_UNAVAILABLE","message":"Store is unavailable"}`,
			wantCode: exitError,
			wantErr:  "rscoord: 503 STORE_UNAVAILABLE: Store is unavailable (retry after 3s)\n",
		},
		{
			name:     "answer that is not an error body",
			args:     []string{"stream", "status", "orders"},
			want:     get,
			status:   http.StatusBadGateway,
			answer:   "<html>bad gateway</html>\n<body/>",
			wantCode: exitError,
			wantErr:  "rscoord: 502 Bad Gateway: <html>bad gateway</html>\n",
		},
		{
			name:     "bad prefix refused before any request",
			args:     []string{"stream", "status", "a/b"},
			wantCode: exitError,
			wantErr:  "streamPrefix",
		},
	})
}

// TestStreamStatusJSONShape decodes --json output of status into the wire type.
func TestStreamStatusJSONShape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, groupsAnswer)
	}))
	defer srv.Close()

	res := runCLI(context.Background(), "stream", "status", "orders", "--json", "--server", srv.URL)
	if res.code != 0 {
		t.Fatalf("code %d, stderr %q", res.code, res.stderr)
	}
	var got protocol.GroupsResponse
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("decode: %v\n%s", err, res.stdout)
	}
	if len(got.Groups) != 2 || got.Groups[0].ConsumerGroup != "billing" || got.Groups[1].ConsumerGroup != "orders" {
		t.Errorf("groups = %+v, want billing and orders of stream orders", got.Groups)
	}
}

// mustJSON encodes v for a wantRequest body.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
