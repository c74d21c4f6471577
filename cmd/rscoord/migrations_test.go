package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestStreamRollbackAndMigrations(t *testing.T) {
	mig := `{"reshardingId":"rs-1","fromShardCount":4,"toShardCount":8,"state":"ROLLED_BACK","createdAt":"2026-11-29T20:00:00Z","updatedAt":"2026-11-29T20:01:00Z"}`
	runCases(t, []cliCase{
		{
			name: "rollback through the default group",
			args: []string{"stream", "rollback", "orders", "rs-1", "--reason", "oops", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders/groups/orders/migrations/rs-1/rollback",
				body: `{"requestedBy":"me","reason":"oops"}`},
			status:  http.StatusAccepted,
			answer:  mig,
			wantOut: []string{"RESHARDING ID", "rs-1", "ROLLED_BACK"},
		},
		{
			name:     "rollback needs a reason",
			args:     []string{"stream", "rollback", "orders", "rs-1", "--reason", " "},
			wantCode: exitError,
			wantErr:  "--reason must not be blank",
		},
		{
			name: "rollback refused past ACTIVE",
			args: []string{"stream", "rollback", "orders", "rs-1", "--reason", "oops", "--group", "billing", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders/groups/billing/migrations/rs-1/rollback",
				body: `{"requestedBy":"me","reason":"oops"}`},
			status:   http.StatusUnprocessableEntity,
			answer:   `{"status":"UNPROCESSABLE_ENTITY","errorCode":"ROLLBACK_NOT_ALLOWED","message":"migration rs-1 is DRAINING"}`,
			wantCode: exitError,
			wantErr:  "422 ROLLBACK_NOT_ALLOWED",
		},
		{
			name: "complete",
			args: []string{"stream", "complete", "orders", "rs-2", "--reason", "pending nobody claims", "--requested-by", "me"},
			want: &wantRequest{method: "POST", path: "/coord/v1/streams/orders/migrations/rs-2/complete",
				body: `{"requestedBy":"me","reason":"pending nobody claims"}`},
			status:  http.StatusAccepted,
			answer:  strings.Replace(strings.Replace(mig, "ROLLED_BACK", "DEPRECATED", 1), "rs-1", "rs-2", 1),
			wantOut: []string{"rs-2", "DEPRECATED"},
		},
		{
			name:     "complete needs a reason",
			args:     []string{"stream", "complete", "orders", "rs-2", "--reason", ""},
			wantCode: exitError,
			wantErr:  "--reason must not be blank",
		},
		{
			name:    "migrations",
			args:    []string{"stream", "migrations", "orders"},
			want:    &wantRequest{method: "GET", path: "/coord/v1/monitoring/streams/orders/groups/orders/migrations"},
			answer:  `{"migrations":[` + mig + `],"activeReshardingId":null}`,
			wantOut: []string{"rs-1", "4", "8", "ROLLED_BACK"},
		},
	})
}

// TestStreamScaleWait follows a scale-out until its new layout is in use:
// the migration ACTIVE (DRAINING here) and every group STABLE on the new
// count. Each wait is said once, and the end is told as done, not as the
// migration's state.
func TestStreamScaleWait(t *testing.T) {
	states := []string{"PREPARING", "ACTIVE", "DRAINING"}
	groups := []string{"RECONCILING", "STABLE"}
	var polls, groupPolls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/coord/v1/streams/orders/scale":
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"streamPrefix":"orders","targetShardCount":8,"affectedConsumerGroups":["orders"],"migrations":[{"reshardingId":"rs-2","fromShardCount":2,"toShardCount":8,"state":"PREPARING","createdAt":"2026-11-29T20:00:00Z","updatedAt":"2026-11-29T20:00:00Z"}]}`))
		case r.Method == http.MethodGet && r.URL.Path == "/coord/v1/streams/orders/groups/orders/migrations/rs-2":
			i := min(int(polls.Add(1))-1, len(states)-1)
			_, _ = w.Write([]byte(`{"reshardingId":"rs-2","fromShardCount":2,"toShardCount":8,"state":"` + states[i] + `","createdAt":"2026-11-29T20:00:00Z","updatedAt":"2026-11-29T20:00:00Z"}`))
		case r.Method == http.MethodGet && r.URL.Path == "/coord/v1/monitoring/groups":
			i := min(int(groupPolls.Add(1))-1, len(groups)-1)
			_, _ = w.Write([]byte(`{"groups":[{"streamPrefix":"orders","consumerGroup":"orders","state":"` + groups[i] + `","shardCount":8},
				{"streamPrefix":"other","consumerGroup":"x","state":"RECONCILING","shardCount":1}],"streams":[]}`))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	res := runCLI(context.Background(), "stream", "scale", "orders", "--to", "8", "--reason", "r", "--wait", "--poll", "10ms", "--server", srv.URL)
	if res.code != exitOK {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if got := int(polls.Load()); got != len(states) {
		t.Errorf("polled %d times, want %d", got, len(states))
	}
	for _, want := range []string{
		"rs-2 PREPARING (2 → 8); waiting for the new shard keys",
		"rs-2 ACTIVE (2 → 8); waiting for every group to read 8 shards: orders (RECONCILING, 8 shards)",
		"rs-2 done (2 → 8): producers and every group use 8 shards; the migration ends in the background (now DRAINING",
	} {
		if strings.Count(res.stdout, want) != 1 {
			t.Errorf("stdout has %q %d times, want once:\n%s", want, strings.Count(res.stdout, want), res.stdout)
		}
	}
}
