package main

import (
	"net/http"
	"testing"
)

func TestStreamAutoscale(t *testing.T) {
	answer := `{"stream":"orders","policy":{"mode":"dry-run","maxShardLength":3000,"maxShardMemoryBytes":null,"maxShardAppendsPerSecond":null,` +
		`"lowWatermark":0.5,"minShards":2,"maxShards":8,"cooldownSeconds":5,"requestedBy":"me","updatedAt":"2026-01-01T00:00:00Z"},` +
		`"lastDecision":{"action":"scale-out","fromShards":2,"toShards":4,"reason":"shard 0 length 4000 is over 3000","at":"2026-01-01T00:00:10Z","taken":false}}`
	runCases(t, []cliCase{
		{
			name:    "show",
			args:    []string{"stream", "autoscale", "orders"},
			want:    &wantRequest{method: "GET", path: "/coord/v1/streams/orders/autoscale"},
			answer:  answer,
			wantOut: []string{"MODE", "dry-run", "MAX SHARD LENGTH", "3000", "SHARDS", "2..8", "COOLDOWN", "5s", "LAST DECISION", "scale-out 2→4 (reported only)"},
		},
		{
			name: "set",
			args: []string{"stream", "autoscale", "orders", "--mode", "dry-run", "--max-shard-length", "3000", "--min-shards", "2",
				"--max-shards", "8", "--cooldown", "5s", "--requested-by", "me"},
			want: &wantRequest{method: "PUT", path: "/coord/v1/streams/orders/autoscale",
				body: `{"mode":"dry-run","maxShardLength":3000,"minShards":2,"maxShards":8,"cooldownSeconds":5,"requestedBy":"me"}`},
			answer:  answer,
			wantOut: []string{"MODE", "dry-run"},
		},
		{
			name:     "bounds without a mode",
			args:     []string{"stream", "autoscale", "orders", "--max-shard-length", "3000"},
			wantCode: exitError,
			wantErr:  "a policy needs --mode",
		},
		{
			name:     "a cooldown of part of a second",
			args:     []string{"stream", "autoscale", "orders", "--mode", "on", "--max-shard-length", "10", "--cooldown", "1500ms"},
			wantCode: exitError,
			wantErr:  "whole seconds",
		},
		{
			name: "refused",
			args: []string{"stream", "autoscale", "orders", "--mode", "on", "--max-shard-length", "10", "--max-shards", "64", "--requested-by", "me"},
			want: &wantRequest{method: "PUT", path: "/coord/v1/streams/orders/autoscale",
				body: `{"mode":"on","maxShardLength":10,"maxShards":64,"requestedBy":"me"}`},
			status:   http.StatusBadRequest,
			answer:   `{"status":"BAD_REQUEST","errorCode":"INVALID_REQUEST","message":"autoscale policy: maxShards 64 is above this coordinator's --max-shards 16"}`,
			wantCode: exitError,
			wantErr:  "--max-shards 16",
		},
	})
}
