package actors_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rscoord/rscoord/actors"
	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redistest"
	"github.com/rscoord/rscoord/internal/poll"
	"github.com/rscoord/rscoord/persistence"
	"github.com/rscoord/rscoord/redisops"
)

// groupWritesFail is a real store whose group writes fail while failing is
// set, as a full disk or a lost store connection makes them.
type groupWritesFail struct {
	persistence.Store
	failing atomic.Bool
}

func (f *groupWritesFail) SaveGroup(ctx context.Context, g *assign.Group, ch *persistence.Changes, expected uint64) (uint64, error) {
	if f.failing.Load() {
		return 0, errors.New("injected group write failure")
	}
	return f.Store.SaveGroup(ctx, g, ch, expected)
}

// TestRoutingLeaseCountsFromTheLastOldRouting: producers get their routing
// from the group actors, which take a new layout after the stream record
// is saved. When a group misses the layout (its write failed), it keeps
// answering the old shard count, with a fresh routing lease, until a later
// check tells it again. No removed shard may retire sooner than one routing
// lease after the last routing answer that still listed it: a producer
// holding that answer may write there until then, and a record written to
// a shard already proven drained is never read.
func TestRoutingLeaseCountsFromTheLastOldRouting(t *testing.T) {
	const lease = time.Second
	ctx := context.Background()
	rs := redistest.Standalone(t)
	pebble, err := persistence.OpenPebble(t.TempDir(), persistence.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pebble.Close() })
	store := &groupWritesFail{Store: pebble}
	c, err := actors.Start(ctx, actors.Config{
		Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AutoCreateGroups: true,
		Redis: redisops.Wrap(rs.Client()), RedisTimeout: 2 * time.Second,
		ProducerRoutingLease: lease, DrainCheckInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(cctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	four := 4
	if _, err := c.CreateStream(ctx, "orders", protocol.CreateRequest{RequestedBy: "t", InitialShardCount: &four}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.ProducerRouting(ctx, "orders", "orders", true); err != nil || r.ShardCount != 4 {
		t.Fatalf("routing before the scale: %+v, %v", r, err)
	}

	// The group misses the scale-in's layout: its write fails.
	store.failing.Store(true)
	two := 2
	_, err = c.Scale(ctx, "orders", protocol.ScaleRequest{TargetShardCount: &two, RequestedBy: "t", Reason: "test"})
	store.failing.Store(false)
	t.Logf("scale with the group's write failing: %v", err)
	ms, err := c.Migrations(ctx, "orders", "orders")
	if err != nil || len(ms.Migrations) != 1 || ms.Migrations[0].State != protocol.MigrationActive {
		t.Fatalf("migrations after the scale: %+v, %v", ms, err)
	}
	id := ms.Migrations[0].ReshardingID

	// Ask for routing as a producer refreshing often would, until the
	// migration leaves ACTIVE (its removed shards, empty, retire at once).
	var lastOld time.Time // when the last routing request answered 4 shards was sent
	var m protocol.Migration
	if !poll.Soon(20*lease, func() bool {
		sent := time.Now()
		r, err := c.ProducerRouting(ctx, "orders", "orders", true)
		if err == nil && r.ShardCount == 4 {
			lastOld = sent
		}
		m, err = c.Migration(ctx, "orders", "orders", id)
		if err != nil {
			t.Fatal(err)
		}
		return m.State != protocol.MigrationActive
	}) {
		t.Fatalf("migration still %s after %v: %s", m.State, 20*lease, m.Detail)
	}
	seen := time.Now()
	if lastOld.IsZero() {
		t.Logf("no routing answer listed the removed shards after the scale: nothing to check")
		return
	}
	// seen is after the retirement: if even seen is within the
	// lease of the last old routing, the retirement was too.
	if early := lastOld.Add(lease).Sub(seen); early > 0 {
		t.Fatalf("migration %s and its removed shards left ACTIVE (seen %v) at least %v before the routing lease of the last answer listing them (sent %v) ended",
			m.State, seen.Format(time.StampMilli), early, lastOld.Format(time.StampMilli))
	}
}
