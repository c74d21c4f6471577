package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
)

// TestDeprecatedAfterHoldsTheMigrationActive: a scale request's
// deprecatedAfter keeps the migration ACTIVE (and so roll-backable) until
// that time even when the routing lease has passed and every shard is
// drained; then it proceeds as usual.
func TestDeprecatedAfterHoldsTheMigrationActive(t *testing.T) {
	t.Parallel()
	rdb := redistest.Standalone(t).Client()
	s := reshardServer(t, rdb, shortLease, true)
	s.CreateStream("orders", 4)
	n := 2
	hold := 1500 * time.Millisecond
	after := time.Now().Add(hold)
	var resp protocol.ScaleResponse
	s.JSON(http.MethodPost, base+"/streams/orders/scale", protocol.ScaleRequest{
		TargetShardCount: &n, RequestedBy: "test", Reason: "hold", DeprecatedAfter: &after,
	}, http.StatusAccepted, &resp)
	id := resp.Migrations[0].ReshardingID

	// ACTIVE all along the lease and the drain checks after it; by then
	// deprecatedAfter is what it waits for.
	var m protocol.Migration
	if !poll.Stays(shortLease+4*drainCheck, drainCheck/2, func() bool {
		m = migration(t, s, "orders", "orders", id)
		return m.State == protocol.MigrationActive
	}) || !strings.Contains(m.Detail, "deprecatedAfter") {
		t.Fatalf("before deprecatedAfter the migration is %s (%s), want ACTIVE waiting for it", m.State, m.Detail)
	}
	awaitMigration(t, s, "orders", "orders", id, protocol.MigrationDeprecated, reshardLimit)
	if time.Now().Before(after) {
		t.Fatalf("DEPRECATED before deprecatedAfter %v", after)
	}
}
