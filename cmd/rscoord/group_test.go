package main

import (
	"net/http"
	"testing"
)

// groupAnswer is a GroupResponse of orders/billing with two members.
const groupAnswer = `{"streamPrefix":"orders","consumerGroup":"billing","state":"STABLE","groupEpoch":3,
 "assignmentEpoch":3,"metadataVersion":6,"shardCount":4,"activeMigration":null,
 "targetAssignmentSummary":{"pod-b-m0":2,"pod-a-m0":2},"currentAssignmentSummary":{"pod-a-m0":2,"pod-b-m0":1}}`

func TestGroupGet(t *testing.T) {
	get := &wantRequest{method: "GET", path: "/coord/v1/streams/orders/groups/billing"}
	runCases(t, []cliCase{
		{
			name:   "key value table and summaries",
			args:   []string{"group", "get", "orders", "billing"},
			want:   get,
			answer: groupAnswer,
			wantOut: []string{
				"STREAM PREFIX", "orders", "CONSUMER GROUP", "billing", "STATE", "STABLE",
				"SHARD COUNT", "4", "GROUP EPOCH", "3", "ASSIGNMENT EPOCH", "3", "METADATA VERSION", "6",
				"ACTIVE MIGRATION", "-",
				"MEMBER", "TARGET SHARDS", "CURRENT SHARDS",
				"pod-a-m0", "2", "2",
				"pod-b-m0", "2", "1",
			},
		},
		{
			name:     "json",
			args:     []string{"group", "get", "orders", "billing", "--json"},
			want:     get,
			answer:   groupAnswer,
			wantJSON: true,
			wantOut:  []string{`"consumerGroup": "billing"`},
			notOut:   []string{"TARGET SHARDS"},
		},
		{
			name: "names with colon and at sign",
			args: []string{"group", "get", "orders:v2", "team@eu"},
			want: &wantRequest{method: "GET", path: "/coord/v1/streams/orders:v2/groups/team@eu"},
			answer: `{"streamPrefix":"orders:v2","consumerGroup":"team@eu","state":"EMPTY",
				"targetAssignmentSummary":{},"currentAssignmentSummary":{}}`,
			wantOut: []string{"orders:v2", "team@eu", "No members."},
		},
		{
			name:     "not found",
			args:     []string{"group", "get", "orders", "billing"},
			want:     get,
			status:   http.StatusNotFound,
			answer:   `{"status":"NOT_FOUND","errorCode":"GROUP_NOT_FOUND","message":"Group not found"}`,
			wantCode: exitError,
			wantErr:  "rscoord: 404 GROUP_NOT_FOUND: Group not found\n",
		},
		{
			name:     "bad group name refused before any request",
			args:     []string{"group", "get", "orders", "bill ing"},
			wantCode: exitError,
			wantErr:  "consumerGroup",
		},
		{
			name:     "at sign is not allowed in a prefix",
			args:     []string{"group", "get", "orders@eu", "billing"},
			wantCode: exitError,
			wantErr:  "streamPrefix",
		},
	})
}

func TestGroupDelete(t *testing.T) {
	path := "/coord/v1/streams/orders/groups/billing"
	runCases(t, []cliCase{
		{
			name: "forced",
			args: []string{"group", "delete", "orders", "billing", "--reason", "cleanup", "--force", "--requested-by", "me"},
			want: &wantRequest{method: "DELETE", path: path,
				body: `{"requestedBy":"me","reason":"cleanup","force":true}`},
			answer:  groupAnswer,
			wantOut: []string{"Deleted consumer group billing of stream orders", "STATE", "STABLE"},
		},
		{
			name: "not forced",
			args: []string{"group", "delete", "orders", "billing", "--reason", "cleanup", "--requested-by", "me"},
			want: &wantRequest{method: "DELETE", path: path,
				body: `{"requestedBy":"me","reason":"cleanup"}`},
			answer:  groupAnswer,
			wantOut: []string{"Deleted"},
		},
		{
			name: "json",
			args: []string{"group", "delete", "orders", "billing", "--reason", "cleanup", "--requested-by", "me", "--json"},
			want: &wantRequest{method: "DELETE", path: path,
				body: `{"requestedBy":"me","reason":"cleanup"}`},
			answer:   groupAnswer,
			wantJSON: true,
			notOut:   []string{"Deleted"},
		},
		{
			name: "live members",
			args: []string{"group", "delete", "orders", "billing", "--reason", "cleanup", "--requested-by", "me"},
			want: &wantRequest{method: "DELETE", path: path,
				body: `{"requestedBy":"me","reason":"cleanup"}`},
			status:   http.StatusConflict,
			answer:   `{"status":"CONFLICT","errorCode":"GROUP_HAS_ACTIVE_MEMBERS","message":"Group has active members"}`,
			wantCode: exitError,
			wantErr:  "rscoord: 409 GROUP_HAS_ACTIVE_MEMBERS: Group has active members\n",
		},
		{
			name:     "reason is required",
			args:     []string{"group", "delete", "orders", "billing"},
			wantCode: exitUsage,
			wantErr:  "--reason",
		},
		{
			name:     "blank reason refused before any request",
			args:     []string{"group", "delete", "orders", "billing", "--reason", " "},
			wantCode: exitError,
			wantErr:  "--reason must not be blank",
		},
		{
			name:     "bad name refused before any request",
			args:     []string{"group", "delete", "orders", "", "--reason", "x"},
			wantCode: exitError,
			wantErr:  "consumerGroup must not be blank",
		},
	})
}

// membersAnswer lists two members; the second has nothing and no lease.
const membersAnswer = `{"members":[
 {"memberId":"pod-b-m0","memberName":"","state":"LEAVING","memberEpoch":-1,"metadataVersion":6,
  "runtimeMaxConcurrency":1,"activeConsumerWorkers":0,"currentAssignment":[],"grantedAssignment":[],
  "revoking":[{"shardIndex":3}],"lastHeartbeatAt":null,"memberLeaseExpiresAt":null,"rebalanceTimeoutMs":60000,
  "rebalanceDeadlineAt":null,"shardProgress":[]},
 {"memberId":"pod-a-m0","memberName":"orders-consumer","state":"ACTIVE","memberEpoch":7,"metadataVersion":6,
  "runtimeMaxConcurrency":4,"activeConsumerWorkers":2,"currentAssignment":[{"shardIndex":0},{"shardIndex":1}],
  "grantedAssignment":[{"shardIndex":0},{"shardIndex":1},{"shardIndex":2}],"revoking":[],
  "lastHeartbeatAt":"2026-11-29T10:00:00Z","memberLeaseExpiresAt":"2026-11-29T10:00:15Z",
  "rebalanceTimeoutMs":60000,"rebalanceDeadlineAt":null,"shardProgress":[]}
]}`

func TestGroupMembers(t *testing.T) {
	get := &wantRequest{method: "GET", path: "/coord/v1/monitoring/streams/orders/groups/billing/members"}
	runCases(t, []cliCase{
		{
			name:   "table sorted by member",
			args:   []string{"group", "members", "orders", "billing"},
			want:   get,
			answer: membersAnswer,
			wantOut: []string{
				"MEMBER", "NAME", "STATE", "EPOCH", "CURRENT", "GRANTED", "REVOKING", "LEASE EXPIRES",
				"pod-a-m0", "orders-consumer", "ACTIVE", "7", "0,1", "0,1,2", "-", "2026-11-29T10:00:15Z",
				"pod-b-m0", "-", "LEAVING", "-1", "-", "-", "3", "-",
			},
		},
		{
			name:    "no members",
			args:    []string{"group", "members", "orders", "billing"},
			want:    get,
			answer:  `{"members":[]}`,
			wantOut: []string{"No members in consumer group billing of stream orders."},
		},
		{
			name:     "json",
			args:     []string{"group", "members", "orders", "billing", "--json"},
			want:     get,
			answer:   membersAnswer,
			wantJSON: true,
			wantOut:  []string{`"memberId": "pod-b-m0"`, `"memberId": "pod-a-m0"`},
		},
		{
			name:     "stream not found",
			args:     []string{"group", "members", "orders", "billing"},
			want:     get,
			status:   http.StatusNotFound,
			answer:   `{"status":"NOT_FOUND","errorCode":"STREAM_NOT_FOUND","message":"Stream not found"}`,
			wantCode: exitError,
			wantErr:  "rscoord: 404 STREAM_NOT_FOUND: Stream not found\n",
		},
		{
			name:     "bad prefix refused before any request",
			args:     []string{"group", "members", "orders}", "billing"},
			wantCode: exitError,
			wantErr:  "streamPrefix",
		},
	})
}

func TestGroupAssignments(t *testing.T) {
	get := &wantRequest{method: "GET", path: "/coord/v1/monitoring/streams/orders/groups/billing/assignments"}
	withViolations := `{"targetAssignment":{"pod-b":[{"shardIndex":2},{"shardIndex":3}],"pod-a":[{"shardIndex":0},{"shardIndex":1}]},
		"currentAssignments":{"pod-a":[{"shardIndex":0},{"shardIndex":1},{"shardIndex":2}],"pod-b":[]},
		"revokeProgress":{"pod-c":[{"shardIndex":3}]},
		"invariantViolations":["shard 2 held by pod-a and assigned to pod-b"]}`
	runCases(t, []cliCase{
		{
			name:   "per member with violations",
			args:   []string{"group", "assignments", "orders", "billing"},
			want:   get,
			answer: withViolations,
			wantOut: []string{
				"MEMBER", "TARGET", "CURRENT", "REVOKING",
				"pod-a", "0,1", "0,1,2", "-",
				"pod-b", "2,3", "-", "-",
				"pod-c", "-", "-", "3",
				"INVARIANT VIOLATIONS (1):", "shard 2 held by pod-a and assigned to pod-b",
			},
		},
		{
			name: "stable",
			args: []string{"group", "assignments", "orders", "billing"},
			want: get,
			answer: `{"targetAssignment":{"pod-a":[{"shardIndex":0}]},"currentAssignments":{"pod-a":[{"shardIndex":0}]},
				"revokeProgress":{},"invariantViolations":[]}`,
			wantOut: []string{"pod-a", "0", "0", "No invariant violations."},
			notOut:  []string{"INVARIANT VIOLATIONS"},
		},
		{
			name:    "empty group",
			args:    []string{"group", "assignments", "orders", "billing"},
			want:    get,
			answer:  `{"targetAssignment":{},"currentAssignments":{},"revokeProgress":{},"invariantViolations":[]}`,
			wantOut: []string{"No assignments.", "No invariant violations."},
		},
		{
			name:     "json",
			args:     []string{"group", "assignments", "orders", "billing", "--json"},
			want:     get,
			answer:   withViolations,
			wantJSON: true,
			wantOut:  []string{`"invariantViolations": [`},
		},
		{
			name:     "failed closed",
			args:     []string{"group", "assignments", "orders", "billing"},
			want:     get,
			status:   http.StatusServiceUnavailable,
			answer:   `{"status":"SERVICE_UNAVAILABLE","errorCode":"STORE_UNAVAILABLE","message":"Group orders/billing failed closed"}`,
			wantCode: exitError,
			wantErr:  "rscoord: 503 STORE_UNAVAILABLE: Group orders/billing failed closed\n",
		},
		{
			name:     "bad group refused before any request",
			args:     []string{"group", "assignments", "orders", "bill/ing"},
			wantCode: exitError,
			wantErr:  "consumerGroup",
		},
	})
}
